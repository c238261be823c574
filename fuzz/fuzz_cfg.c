/* libFuzzer harness for the .cfg parser (src/io/cfg.c).  The input is a file's
 * bytes.  It goes through both entry points: sc_cfg_parse_string (a C
 * string: up to the first NUL) and sc_cfg_load (the bytes as a file, NULs
 * and the size limit included).  For text without NUL both must agree.  A
 * parsed file then has every key read by each getter, as the layer parsers
 * do, and unknown keys checked. */
#include "fuzz_common.h"

static int same_cfg(const struct sc_cfg *a, const struct sc_cfg *b)
{
    if (a->nsections != b->nsections)
        return 0;
    for (int i = 0; i < a->nsections; i++) {
        const struct sc_cfg_section *x = &a->sections[i], *y = &b->sections[i];
        if (strcmp(x->name, y->name) || x->line != y->line || x->nkeys != y->nkeys)
            return 0;
        for (int k = 0; k < x->nkeys; k++)
            if (strcmp(x->keys[k].key, y->keys[k].key) || strcmp(x->keys[k].value, y->keys[k].value) ||
                x->keys[k].line != y->keys[k].line)
                return 0;
    }
    return 1;
}

/* Reads every key the ways the layer parsers do; only the error messages
 * are checked, any value is fine. */
static void read_all(struct sc_cfg *cfg)
{
    for (int i = 0; i < cfg->nsections; i++) {
        struct sc_cfg_section *s = &cfg->sections[i];
        if (!s->name[0] || s->line < 1)
            fuzz_fail("cfg", "empty section name or bad line");
        fuzz_reset_error();
        int rc = sc_cfg_check_unused(cfg, s);
        if (s->nkeys ? rc == SC_OK : rc != SC_OK)
            fuzz_fail("cfg", "check_unused disagrees with the keys");
        if (rc != SC_OK)
            fuzz_check_error(rc, "sc_cfg_check_unused");
        /* The getters scan the section (layers read a few keys each), so
         * reading every key of a huge section would be quadratic here. */
        if (s->nkeys > 64)
            continue;
        for (int k = 0; k < s->nkeys; k++) {
            const char *key = s->keys[k].key;
            int iv;
            double dv;
            const char *sv;
            if (!key[0] || !s->keys[k].value[0])
                fuzz_fail("cfg", "empty key or value");
            fuzz_reset_error();
            if ((rc = sc_cfg_get_int(cfg, s, key, 0, -(1 << 20), 1 << 20, &iv)) != SC_OK)
                fuzz_check_error(rc, "sc_cfg_get_int");
            fuzz_reset_error();
            if ((rc = sc_cfg_get_float(cfg, s, key, 0, &dv)) != SC_OK)
                fuzz_check_error(rc, "sc_cfg_get_float");
            if (sc_cfg_get_str(cfg, s, key, NULL, &sv) != SC_OK || sv != s->keys[k].value)
                fuzz_fail("cfg", "sc_cfg_get_str");
        }
        if (sc_cfg_check_unused(cfg, s) != SC_OK)
            fuzz_fail("cfg", "a key read by the getters is still unused");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct sc_cfg *from_string = NULL, *from_file = NULL;
    fuzz_reset_error();
    int rc_string = sc_cfg_parse_string(text, "fuzz.cfg", &from_string);
    if (rc_string != SC_OK)
        fuzz_check_error(rc_string, "sc_cfg_parse_string");

    const char *path = fuzz_path(0, "fuzz.cfg");
    fuzz_write(path, data, size);
    fuzz_reset_error();
    int rc_file = sc_cfg_load(path, &from_file);
    if (rc_file != SC_OK)
        fuzz_check_error(rc_file, "sc_cfg_load");

    /* Same bytes, same answer: only a NUL (which ends the string early) or
     * the file size limit may tell the two apart. */
    if (!memchr(data, 0, size) && size <= 1024 * 1024) {
        if ((rc_string == SC_OK) != (rc_file == SC_OK))
            fuzz_fail("cfg", "string and file parses disagree");
        if (rc_string == SC_OK && !same_cfg(from_string, from_file))
            fuzz_fail("cfg", "string and file parses give different results");
    }
    if (from_string)
        read_all(from_string);
    sc_cfg_free(from_string);
    sc_cfg_free(from_file);
    free(text);
    return 0;
}
