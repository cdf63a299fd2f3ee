/* wex layout --help-options: an engine's options, from its manifest. */
#ifndef CLI_LAYOUT_OPTIONS_H
#define CLI_LAYOUT_OPTIONS_H

/* Prints the engine's description, capabilities and every option (type,
 * allowed values, default, description); returns the exit status. */
int layout_print_options(const char *engine);

#endif /* CLI_LAYOUT_OPTIONS_H */
