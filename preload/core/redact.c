/*
 * redact.c - the redaction rule of redact.h, applied to names, values and
 * command-line arguments.
 *
 * Runs once per process, when its trace is created, never on the hot path.
 * It errs on the side of hiding: a name that merely looks secret (MONKEY ends
 * in KEY) loses its value, a secret under a name that does not look secret
 * is kept, which is why the rule is documented where users read the env and
 * process tables (docs/schema.md).
 */
#include "cutrace/redact.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const SECRET_WORDS[] = {"key", "keys", "token",     "pass",
                                           "pwd", "auth", "passphrase"};
static const char *const SECRET_ENDINGS[] = {"key", "token", "auth"};
static const char *const SECRET_PARTS[] = {"secret", "password", "passwd", "credential"};
/* Whole names that the word rule would hide but are the shell's working directories. */
static const char *const PLAIN_NAMES[] = {"PWD", "OLDPWD"};

#define COUNT(a) (sizeof(a) / sizeof *(a))

static bool word_is_secret(const char *w, size_t len)
{
    for (size_t i = 0; i < COUNT(SECRET_WORDS); i++) {
        if (len == strlen(SECRET_WORDS[i]) && strncasecmp(w, SECRET_WORDS[i], len) == 0)
            return true;
    }
    for (size_t i = 0; i < COUNT(SECRET_ENDINGS); i++) {
        size_t elen = strlen(SECRET_ENDINGS[i]);
        if (len >= elen && strncasecmp(w + len - elen, SECRET_ENDINGS[i], elen) == 0)
            return true;
    }
    for (size_t i = 0; i < COUNT(SECRET_PARTS); i++) {
        size_t plen = strlen(SECRET_PARTS[i]);
        for (size_t k = 0; k + plen <= len; k++) {
            if (strncasecmp(w + k, SECRET_PARTS[i], plen) == 0)
                return true;
        }
    }
    return false;
}

static bool is_separator(char c)
{
    return c == '_' || c == '-' || c == '.';
}

bool ct_redact_secret_name(const char *name, size_t len)
{
    for (size_t i = 0; i < COUNT(PLAIN_NAMES); i++) {
        if (len == strlen(PLAIN_NAMES[i]) && strncmp(name, PLAIN_NAMES[i], len) == 0)
            return false;
    }
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        bool camel = i < len && i > start && islower((unsigned char)name[i - 1]) &&
                     isupper((unsigned char)name[i]);
        if (i < len && !is_separator(name[i]) && !camel)
            continue;
        if (i > start && word_is_secret(name + start, i - start))
            return true;
        start = camel ? i : i + 1;
    }
    return false;
}

/* Appends n bytes to out at *o (the caller sized out). */
static void put(char *out, size_t *o, const char *s, size_t n)
{
    memcpy(out + *o, s, n);
    *o += n;
}

/* Writes value[0..n) with URL passwords replaced at out+*o; out holds enough (see bound). */
static void redact_urls(const char *value, size_t n, char *out, size_t *o)
{
    const char *p = value, *end = value + n;
    for (;;) {
        const char *sep = memmem(p, (size_t)(end - p), "://", 3);
        if (!sep)
            break;
        const char *host = sep + 3;
        const char *auth_end = host;
        while (auth_end < end && !strchr("/?# \t\n", *auth_end))
            auth_end++;
        const char *at = NULL;
        for (const char *c = host; c < auth_end; c++)
            if (*c == '@')
                at = c;
        const char *colon = at ? memchr(host, ':', (size_t)(at - host)) : NULL;
        if (colon && colon + 1 < at) {
            put(out, o, p, (size_t)(colon + 1 - p));
            put(out, o, CT_REDACTED, strlen(CT_REDACTED));
            p = at;
        } else {
            put(out, o, p, (size_t)(host - p));
            p = host;
        }
    }
    put(out, o, p, (size_t)(end - p));
}

/* The most redact_urls can write for value[0..n): each "://" may add one marker. */
static size_t url_bound(const char *value, size_t n)
{
    size_t urls = 0;
    for (const char *p = value; (p = memmem(p, n - (size_t)(p - value), "://", 3)); p += 3)
        urls++;
    return n + urls * strlen(CT_REDACTED);
}

char *ct_redact_value(const char *value)
{
    size_t n = strlen(value);
    char *out = malloc(url_bound(value, n) + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    redact_urls(value, n, out, &o);
    out[o] = '\0';
    return out;
}

/*
 * arg = [-...]NAME[=VALUE] with NAME of [A-Za-z0-9_.-], starting with a
 * letter or '_': *name and *name_len set, *value the byte after '=' (NULL
 * without one). False for anything else (positional arguments).
 */
static bool parse_option(const char *arg, size_t len, const char **name, size_t *name_len,
                         const char **value)
{
    size_t dashes = 0;
    while (dashes < len && arg[dashes] == '-')
        dashes++;
    size_t i = dashes;
    if (i == len || !(isalpha((unsigned char)arg[i]) || arg[i] == '_'))
        return false;
    while (i < len && (isalnum((unsigned char)arg[i]) || is_separator(arg[i])))
        i++;
    if (i < len && arg[i] != '=')
        return false;
    if (i == len && dashes == 0)
        return false; /* a plain word */
    *name = arg + dashes;
    *name_len = i - dashes;
    *value = i < len ? arg + i + 1 : NULL;
    return true;
}

char *ct_redact_argv(const char *args, size_t len, size_t *out_len)
{
    /* Each argument gains at most one marker and a NUL, or its URLs' markers. */
    size_t count = 1;
    for (size_t i = 0; i < len; i++)
        count += args[i] == '\0';
    size_t cap = url_bound(args, len) + count * (strlen(CT_REDACTED) + 1);
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = 0;
    bool hide_next = false;
    for (size_t i = 0; i < len;) {
        const char *arg = args + i;
        size_t alen = strnlen(arg, len - i);
        i += alen + 1;
        const char *name, *value;
        size_t name_len;
        bool option = parse_option(arg, alen, &name, &name_len, &value);
        if (hide_next && !(alen > 0 && arg[0] == '-')) {
            put(out, &o, CT_REDACTED, strlen(CT_REDACTED));
            hide_next = false;
        } else if (option && ct_redact_secret_name(name, name_len)) {
            if (value) {
                put(out, &o, arg, (size_t)(value - arg));
                put(out, &o, CT_REDACTED, strlen(CT_REDACTED));
            } else {
                put(out, &o, arg, alen);
            }
            hide_next = !value;
        } else {
            hide_next = false;
            redact_urls(arg, alen, out, &o);
        }
        out[o++] = '\0';
    }
    *out_len = o;
    return out;
}
