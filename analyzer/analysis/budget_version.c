/*
 * budget_version.c - release numbers for the budget's replays
 * (budget_version.h).
 */
#include "analysis/budget_version.h"

#include <ctype.h>
#include <string.h>

bool budget_parse_server_version(const char *text, int parts[4])
{
    memset(parts, 0, 4 * sizeof(int));
    if (!text)
        return false;
    if (*text == 'v' || *text == 'V')
        text++;
    int n = 0;
    while (n < 4 && isdigit((unsigned char)*text)) {
        long v = 0;
        while (isdigit((unsigned char)*text) && v < 100000)
            v = v * 10 + (*text++ - '0');
        if (isdigit((unsigned char)*text))
            return false; /* no release has a number that long */
        parts[n++] = (int)v;
        if (*text != '.' || !isdigit((unsigned char)text[1]))
            break;
        text++;
    }
    /* What may follow the numbers: a pre-release or post-release tag. */
    return n >= 2 && (*text == '\0' || *text == '.' || *text == '-' || *text == '+' ||
                      isalpha((unsigned char)*text));
}

int budget_version_compare(const int a[4], const int b[4])
{
    for (int i = 0; i < 4; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

bool budget_version_at_least(const char *text, int major, int minor)
{
    int v[4], since[4] = {major, minor, 0, 0};
    return budget_parse_server_version(text, v) && budget_version_compare(v, since) >= 0;
}
