/* The command line of every subcommand: getopt_long, and numbers whose
 * range is checked and told. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "cli.h"

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    return 0;
}

void cli_parser_init(cli_parser *p, const char *command, int argc, char **argv,
                     const char *shortopts, const struct option *options)
{
    memset(p, 0, sizeof(*p));
    p->command = command;
    p->argc = argc;
    p->argv = argv;
    p->options = options;
    /* "-": arguments that are no option come back in place, as value 1,
     * so a command reads its line in the order written (and
     * POSIXLY_CORRECT changes nothing). ":": a missing value is told
     * apart from an unknown option. */
    snprintf(p->shortopts, sizeof(p->shortopts), "-:%s", shortopts);
    optind = 0; /* glibc: start afresh */
    opterr = 0; /* the messages are ours, one line each */
}

int cli_error(const char *command, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_BAD;
}

/* `text` quoted as C would, at most 80 bytes of it: whatever was typed,
 * the message stays one line. */
static void quoted(const char *text, char *out, size_t cap)
{
    size_t n = 0;

    out[n++] = '"';
    for (const char *s = text; *s && n + 6 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (s - text >= 80) {
            n += (size_t)snprintf(out + n, cap - n, "...");
            break;
        }
        if (c == '"' || c == '\\')
            n += (size_t)snprintf(out + n, cap - n, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", c);
        else
            out[n++] = (char)c;
    }
    out[n++] = '"';
    out[n] = '\0';
}

int cli_parse_u64(const char *command, const char *option, const char *text,
                  uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    int ok = text[0] != '\0';
    char shown[128];

    /* Digits only: strtoull would skip blanks, take a sign (and wrap a
     * negative one round to a huge value) and a 0x prefix. */
    for (const char *s = text; ok && *s; s++) {
        unsigned digit = (unsigned)(*s - '0');
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - digit) / 10)
            ok = 0;
        else
            v = v * 10 + digit;
    }
    if (!ok || v < min || v > max) {
        quoted(text, shown, sizeof(shown));
        cli_error(command, "%s: expected an integer from %llu to %llu, got %s",
                  option, (unsigned long long)min, (unsigned long long)max,
                  shown);
        return -1;
    }
    *out = v;
    return 0;
}

/* A plain decimal (no blanks, hex, inf or nan, which strtod takes) in
 * *v; 0 when `text` is not one. */
static int plain_decimal(const char *text, double *v)
{
    char *end = NULL;

    if (text[0] == '\0' || strspn(text, "0123456789.eE+-") != strlen(text) ||
        !(text[0] == '.' || (text[0] >= '0' && text[0] <= '9')))
        return 0;
    errno = 0;
    *v = strtod(text, &end);
    return *end == '\0' && errno == 0;
}

int cli_parse_seconds(const char *command, const char *option, const char *text,
                      double max, double *out)
{
    char shown[128];
    double v = 0;

    if (!plain_decimal(text, &v) || !(v > 0 && v <= max)) {
        quoted(text, shown, sizeof(shown));
        cli_error(command,
                  "%s: expected seconds, more than 0 and at most "
                  "%g, got %s",
                  option, max, shown);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_fraction(const char *command, const char *option,
                       const char *text, double *out)
{
    char shown[128];
    double v = 0;

    if (!plain_decimal(text, &v) || !(v >= 0 && v <= 1)) {
        quoted(text, shown, sizeof(shown));
        cli_error(command,
                  "%s: expected a fraction from 0 to 1 (0.01 for "
                  "1 %%), got %s",
                  option, shown);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_other_option(const cli_parser *p, int c, void (*usage)(FILE *out))
{
    if (c == 'h') {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (c == CLI_POSITIONAL)
        cli_unexpected(p);
    return CLI_EXIT_USAGE;
}

int cli_unexpected(const cli_parser *p)
{
    return cli_error(p->command, "unexpected argument '%s' (see '%s --help')",
                     p->arg, p->command);
}

int cli_u64(const cli_parser *p, uint64_t min, uint64_t max, uint64_t *out)
{
    return cli_parse_u64(p->command, p->name, p->arg, min, max, out);
}

int cli_seconds(const cli_parser *p, double max, double *out)
{
    return cli_parse_seconds(p->command, p->name, p->arg, max, out);
}

int cli_fraction(const cli_parser *p, double *out)
{
    return cli_parse_fraction(p->command, p->name, p->arg, out);
}

/* The long option whose value is `val`, or NULL. */
static const struct option *by_val(const cli_parser *p, int val)
{
    for (const struct option *o = p->options; o->name; o++)
        if (o->flag == NULL && o->val == val)
            return o;
    return NULL;
}

/* What messages call option `val`: its long name, else its short one. */
static void name_option(cli_parser *p, int val, int index)
{
    const struct option *o = index >= 0 ? &p->options[index] : by_val(p, val);

    if (o != NULL)
        snprintf(p->name, sizeof(p->name), "--%s", o->name);
    else
        snprintf(p->name, sizeof(p->name), "-%c", val);
}

/* An option getopt_long did not take: unknown, ambiguous, or given a
 * value it does not take. */
static int refuse(cli_parser *p)
{
    int at = optind > 0 && optind <= p->argc ? optind - 1 : p->argc - 1;
    const char *written = p->argv[at]; /* getopt has gone past it */
    const struct option *o = optopt ? by_val(p, optopt) : NULL;
    size_t len = strcspn(written, "=");
    char matches[256] = "";
    size_t count = 0, used = 0;

    if (o != NULL && o->has_arg == no_argument &&
        strncmp(written, "--", 2) == 0)
        return cli_error(p->command, "--%s takes no value, got '%s'", o->name,
                         written);
    if (optopt != 0) /* a short option: the argument may hold several */
        return cli_error(p->command,
                         "unknown option '-%c' (see '%s "
                         "--help')",
                         optopt, p->command);
    if (strncmp(written, "--", 2) == 0 && len > 2)
        for (o = p->options; o->name; o++)
            if (strncmp(o->name, written + 2, len - 2) == 0 &&
                used < sizeof(matches)) {
                used +=
                    (size_t)snprintf(matches + used, sizeof(matches) - used,
                                     "%s--%s", count++ ? ", " : "", o->name);
            }
    if (count > 1)
        return cli_error(p->command,
                         "ambiguous option '%.*s': %s (see '%s "
                         "--help')",
                         (int)len, written, matches, p->command);
    return cli_error(p->command, "unknown option '%.*s' (see '%s --help')",
                     (int)len, written, p->command);
}

int cli_next(cli_parser *p)
{
    int index = -1, c;

    if (p->rest > 0) {
        if (p->rest >= p->argc)
            return CLI_DONE;
        p->arg = p->argv[p->rest++];
        return CLI_POSITIONAL;
    }
    c = getopt_long(p->argc, p->argv, p->shortopts, p->options, &index);
    p->arg = optarg;
    switch (c) {
    case -1: /* the end, or "--": whatever follows is positional */
        p->rest = optind;
        return cli_next(p);
    case 1: return CLI_POSITIONAL;
    case ':':
        name_option(p, optopt, -1);
        return cli_error(p->command, "%s needs a value (see '%s --help')",
                         p->name, p->command);
    case '?': return refuse(p);
    default: name_option(p, c, index); return c;
    }
}

const char *cli_second_value(cli_parser *p, const char *what)
{
    /* Options come in order (no permutation), so the next argument is
     * the one written after the value. */
    if (optind >= p->argc) {
        cli_error(p->command, "%s needs %s after %s", p->name, what, p->arg);
        return NULL;
    }
    return p->argv[optind++];
}
