/*
 * redact.h - the one rule for what of the environment and the command line a
 * trace may keep.
 *
 * Traces are shared (attached to bug reports, copied between clusters), so a
 * secret that reaches one leaks. The same rule covers environment names and
 * values and command-line arguments:
 *   - A name is split into words at '_', '-', '.' and lower-to-upper case
 *     changes, compared in any case. It is secret if a word is KEY, KEYS,
 *     TOKEN, PASS, PWD, AUTH or PASSPHRASE, ends in KEY, TOKEN or AUTH
 *     (APIKEY, HFTOKEN, OAUTH), or contains SECRET, PASSWORD, PASSWD or
 *     CREDENTIAL. Not secret: TOKENS and TOKENIZER (model token counts and
 *     tokenizers, as in --max-num-batched-tokens), and the shell's working
 *     directories PWD and OLDPWD.
 *   - The value of a secret name becomes CT_REDACTED.
 *   - In any other value or argument, the password of every URL
 *     scheme://user:password@host becomes CT_REDACTED (the rest of the URL is
 *     kept).
 *   - An argument --NAME=VALUE (any number of dashes) or NAME=VALUE with a
 *     secret NAME keeps NAME= and loses VALUE; after an argument --NAME with
 *     a secret NAME, the next argument is redacted unless it starts with '-'.
 */
#ifndef CUTRACE_REDACT_H
#define CUTRACE_REDACT_H

#include <stdbool.h>
#include <stddef.h>

#define CT_REDACTED "<redacted>"

/* True if a variable or option called name[0..len) holds a secret. */
bool ct_redact_secret_name(const char *name, size_t len);

/* value with every URL password replaced (malloc'd; NULL if out of memory). */
char *ct_redact_value(const char *value);

/*
 * The NUL-separated argument bytes of a command line with the rule applied,
 * as NUL-separated bytes (malloc'd, *out_len set; NULL if out of memory).
 */
char *ct_redact_argv(const char *args, size_t len, size_t *out_len);

#endif
