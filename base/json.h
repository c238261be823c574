/* JSON (RFC 8259) in: one lexer (whitespace, strings with their escapes,
 * numbers) under two ways of reading a document.
 *
 * - A cursor, for formats read in one pass whose structure the reader
 *   knows (safetensors headers): sc_json_expect, sc_json_string,
 *   sc_json_uint, sc_json_next_member.  Nothing recurses, so no input can
 *   make the reader run out of stack.
 * - A tree (sc_json_parse_value), for documents whose keys come in any
 *   order and whose unknown parts are skipped (traces); nesting is bounded.
 *
 * Every error is SC_ERR_PARSE with one line "PATH: [CONTEXT at ]byte N:
 * WHAT", N counted from 0 in the text; syntax errors end with what was
 * found instead ("expected ':', found '['").  Text may hold NUL bytes: a
 * NUL is not the end of it. */
#ifndef SC_BASE_JSON_H
#define SC_BASE_JSON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct sc_json {
    const char *text;
    size_t len, pos;     /* the text is text[0, len); the cursor is at pos */
    const char *path;    /* named in messages */
    const char *context; /* e.g. "bad safetensors header"; NULL: none */
};

/* SC_ERR_PARSE with the message above, at the cursor. */
int sc_json_error(const struct sc_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same at byte pos (a value's position in the tree). */
int sc_json_error_at(const struct sc_json *j, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int sc_json_verror_at(const struct sc_json *j, size_t pos, const char *fmt, va_list ap);

/* ---- the cursor ---- */

/* Skips whitespace; SC_OK at the end of the text, else "expected the end
 * of the file after the JSON value". */
int sc_json_expect_end(struct sc_json *j);

/* Skips whitespace; the next byte, 0 at the end (or at a NUL byte). */
char sc_json_peek(struct sc_json *j);
/* Skips whitespace, then c, else "expected 'c'". */
int sc_json_expect(struct sc_json *j, char c);
/* A string, decoded into a new NUL-terminated buffer (the caller's to
 * free) after whitespace; "expected '\"'" when there is none.  An escaped
 * NUL (\u0000) is refused: the text would silently end there. */
int sc_json_string(struct sc_json *j, char **out);
/* A number that is an integer in [0, max]. */
int sc_json_uint(struct sc_json *j, uint64_t max, uint64_t *out);
/* The members of an object, after its '{': 1 with *key (the caller's to
 * free) and the cursor after the ':', 0 after the closing '}', or a
 * negative SC_ERR_*.  *first starts at 1. */
int sc_json_next_member(struct sc_json *j, int *first, char **key);

/* ---- the tree ---- */

enum sc_json_type { SC_JSON_NULL, SC_JSON_FALSE, SC_JSON_TRUE, SC_JSON_NUM, SC_JSON_STR, SC_JSON_ARR, SC_JSON_OBJ };

struct sc_json_value {
    enum sc_json_type type;
    size_t pos;    /* where the value starts in the text */
    double num;    /* SC_JSON_NUM (finite) */
    char *str;     /* SC_JSON_STR: decoded, NUL-terminated */
    size_t n, cap; /* SC_JSON_ARR, SC_JSON_OBJ: items */
    struct sc_json_value *item;
    char **key; /* SC_JSON_OBJ: key[i] names item[i] */
};

/* One value at the cursor into *v (zeroed first), arrays and objects
 * nested at most max_depth deep.  On failure *v holds what was read:
 * sc_json_free it either way. */
int sc_json_parse_value(struct sc_json *j, struct sc_json_value *v, int max_depth);
void sc_json_free(struct sc_json_value *v);
/* The member of obj named key (the first one), or NULL. */
const struct sc_json_value *sc_json_get(const struct sc_json_value *obj, const char *key);

#endif
