/*
 * shellquote.c - shell quoting of words and command lines (shellquote.h).
 */
#include "out/shellquote.h"

#include "cli.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The bytes that need no quotes: the tracer's set (procinfo.c). */
static const char PLAIN[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,=:@%";

char *shell_quote(const char *word)
{
    bool plain = word[0] != '\0';
    for (const char *c = word; *c; c++)
        if (!strchr(PLAIN, *c))
            plain = false;
    if (plain)
        return xstrdup(word);
    size_t len = 2;
    for (const char *c = word; *c; c++)
        len += *c == '\'' ? 4 : 1;
    char *quoted = xmalloc(len + 1), *out = quoted;
    *out++ = '\'';
    for (const char *c = word; *c; c++) {
        if (*c == '\'') {
            memcpy(out, "'\\''", 4);
            out += 4;
        } else {
            *out++ = *c;
        }
    }
    *out++ = '\'';
    *out = '\0';
    return quoted;
}

char *shell_join(char *const *words, size_t count)
{
    char *line = xstrdup("");
    for (size_t i = 0; i < count; i++) {
        char *word = shell_quote(words[i]);
        char *longer = xasprintf("%s%s%s", line, i ? " " : "", word);
        free(line);
        free(word);
        line = longer;
    }
    return line;
}
