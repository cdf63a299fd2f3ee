# Turns the schema files into a C source so libwex carries its own schemas
# and never depends on where (or whether) they were installed.
#   cmake -DOUT=file.c -DINPUTS="a.json|b.json" -P embed.cmake
string(REPLACE "|" ";" INPUTS "${INPUTS}")
set(body "/* Generated from the schema files by schemas/embed.cmake. */\n#include <stddef.h>\n#include <string.h>\n\n")
set(table "")
foreach(input ${INPUTS})
  get_filename_component(base "${input}" NAME)
  string(REGEX REPLACE "\\.schema\\.json$" "" key "${base}")
  string(MAKE_C_IDENTIFIER "${key}" ident)
  file(READ "${input}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "static const char schema_${ident}[] = {${bytes} 0x00};\n")
  string(APPEND table "    {\"${key}\", schema_${ident}},\n")
endforeach()
string(APPEND body "\nstatic const struct { const char *name; const char *text; } schemas[] = {\n${table}};\n\n")
string(APPEND body "const char *wex__embedded_schema(const char *name)\n{\n    for (size_t i = 0; i < sizeof(schemas) / sizeof(schemas[0]); i++)\n        if (strcmp(schemas[i].name, name) == 0)\n            return schemas[i].text;\n    return NULL;\n}\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
