/* Configuration files (Darknet-style INI): the parser and its getters.
 * Part of the public API (src/starconv.h). */
#ifndef SC_IO_CFG_H
#define SC_IO_CFG_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- configuration files (Darknet-style INI) ---------------------------- */

struct sc_cfg_key {
    char *key;
    char *value;
    int line;
    int used; /* set by the getters, so that unknown keys can be reported */
};

struct sc_cfg_section {
    char *name; /* without brackets, e.g. "convolutional" */
    int line;
    struct sc_cfg_key *keys;
    int nkeys;
};

struct sc_cfg {
    char *path;
    struct sc_cfg_section *sections;
    int nsections;
};

/* Parse a file: '#' and ';' start comments, blank lines are skipped,
 * "[name]" opens a section, "key=value" (spaces around tolerated) adds a key
 * to the current one.  Errors name path:line. */
int sc_cfg_load(const char *path, struct sc_cfg **out);
int sc_cfg_parse_string(const char *text, const char *name, struct sc_cfg **out);
void sc_cfg_free(struct sc_cfg *cfg);

/* Getters: return 0 and set *out, or the default when the key is absent;
 * a value that is not a number (or out of [min, max]) is an SC_ERR_PARSE
 * naming path:line and key.  They mark the key used. */
int sc_cfg_get_int(const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key, int def, int min, int max,
                   int *out);
int sc_cfg_get_float(const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key, double def, double *out);
/* *out points into the section (not copied); def may be NULL. */
int sc_cfg_get_str(const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key, const char *def,
                   const char **out);
/* SC_ERR_PARSE "path:line: unknown key 'k' in [section]" for the first key
 * that no getter has read. */
int sc_cfg_check_unused(const struct sc_cfg *cfg, const struct sc_cfg_section *s);

#ifdef __cplusplus
}
#endif
#endif
