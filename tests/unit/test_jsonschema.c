/*
 * Unit tests for host/lib/jsonschema.c: messages, pointers, limits,
 * malformed schemas and default filling. Cross-checking verdicts against
 * python-jsonschema is tests/schema/crosscheck.py's job.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonschema.h"

/* Parses JSON written with ' for " so the tests stay readable; no test
 * needs a literal apostrophe. */
static cJSON *json(const char *text)
{
    char *copy = strdup(text), *p;
    cJSON *value;

    ck_assert_ptr_nonnull(copy);
    for (p = copy; *p; p++)
        if (*p == '\'')
            *p = '"';
    value = cJSON_Parse(copy);
    free(copy);
    ck_assert_msg(value != NULL, "test JSON does not parse: %s", text);
    return value;
}

/* Validates; schema and document are freed before the result is looked at,
 * so the result must own all its strings. */
static int run(const char *schema_text, const char *doc_text,
               wex__schema_result *result)
{
    cJSON *schema = json(schema_text), *doc = json(doc_text);
    int rc = wex__schema_validate(schema, doc, result);

    cJSON_Delete(schema);
    cJSON_Delete(doc);
    return rc;
}

/* Expects exactly one error and checks it. */
static void expect_one(const char *schema, const char *doc, const char *pointer,
                       const char *message)
{
    wex__schema_result r;
    int rc = run(schema, doc, &r);

    ck_assert_int_eq(rc, 1);
    ck_assert_uint_eq(r.count, 1);
    ck_assert_str_eq(r.errors[0].pointer, pointer);
    ck_assert_str_eq(r.errors[0].message, message);
    wex__schema_result_free(&r);
}

static void expect_valid(const char *schema, const char *doc)
{
    wex__schema_result r;

    ck_assert_int_eq(run(schema, doc, &r), 0);
    ck_assert_uint_eq(r.count, 0);
    ck_assert_ptr_null(r.errors);
    wex__schema_result_free(&r);
}

/* Expects a malformed-schema failure located at `pointer`. */
static void expect_malformed(const char *schema, const char *doc,
                             const char *pointer, const char *needle)
{
    wex__schema_result r;

    ck_assert_int_eq(run(schema, doc, &r), -EINVAL);
    ck_assert_uint_eq(r.count, 1);
    ck_assert_str_eq(r.errors[0].pointer, pointer);
    ck_assert_msg(strstr(r.errors[0].message, needle),
                  "message \"%s\" lacks \"%s\"", r.errors[0].message, needle);
    wex__schema_result_free(&r);
}

/* Builds a document of `depth` nested arrays: [[[...]]]. */
static cJSON *nested_arrays(int depth)
{
    cJSON *doc = cJSON_CreateArray(), *inner = doc;
    int i;

    for (i = 1; i < depth; i++) {
        cJSON *next = cJSON_CreateArray();

        ck_assert_ptr_nonnull(next);
        cJSON_AddItemToArray(inner, next);
        inner = next;
    }
    return doc;
}

START_TEST(documented_messages)
{
    expect_one("{'type':'integer','minimum':1}", "0", "",
               "expected integer >= 1, got 0");
    expect_one("{'required':['model']}", "{}", "",
               "missing required property \"model\"");
    expect_one("{'properties':{'a':{},'b':{},'c':{}},"
               "'additionalProperties':false}",
               "{'a':1,'foo':2}", "",
               "unknown property \"foo\" (allowed: a, b, c)");
    expect_one("{'properties':{'t':{'enum':['shm','ucx']}}}", "{'t':'tcp'}",
               "/t", "expected one of \"shm\", \"ucx\", got \"tcp\"");
    expect_one("{'additionalProperties':false}", "{'x':1}", "",
               "unknown property \"x\" (no properties are allowed here)");
    /* Likely typos get a suggestion; short names are not guessed at. */
    expect_one("{'properties':{'name':{},'library_path':{}},"
               "'additionalProperties':false}",
               "{'libary_path':1}", "",
               "unknown property \"libary_path\", did you mean "
               "\"library_path\"? (allowed: name, library_path)");
    expect_one("{'properties':{'name':{}},'additionalProperties':false}",
               "{'nmae':1}", "",
               "unknown property \"nmae\", did you mean \"name\"? "
               "(allowed: name)");
    expect_one("{'properties':{'a':{}},'additionalProperties':false}",
               "{'b':1}", "", "unknown property \"b\" (allowed: a)");
}
END_TEST

START_TEST(type_messages)
{
    expect_one("{'type':'string'}", "5", "", "expected string, got number 5");
    expect_one("{'type':['string','integer','null']}", "true", "",
               "expected string, integer or null, got boolean true");
    expect_one("{'type':'object'}", "null", "", "expected object, got null");
    expect_one("{'type':'number','exclusiveMaximum':10}", "10", "",
               "expected number < 10, got 10");
    expect_one("{'maxItems':1}", "[1,2]", "", "expected at most 1 item, got 2");
    expect_one("{'minItems':2}", "[]", "", "expected at least 2 items, got 0");
    expect_one("{'uniqueItems':true}", "[1,'a',1.0]", "",
               "expected unique items, but items 0 and 2 are both 1");
    expect_one("{'const':{'a':true}}", "{'a':1}", "",
               "expected {\"a\":true}, got {\"a\":1}");
}
END_TEST

START_TEST(integer_semantics)
{
    expect_valid("{'type':'integer'}", "1.0");
    expect_valid("{'type':'integer'}", "1e300");
    expect_valid("{'type':'integer'}", "-0");
    expect_one("{'type':'integer'}", "1.5", "",
               "expected integer, got number 1.5");
    expect_one("{'type':'integer'}", "true", "",
               "expected integer, got boolean true");
    expect_one("{'enum':[1]}", "true", "", "expected 1, got true");
    expect_valid("{'enum':[1]}", "1.0");
    expect_valid("{'uniqueItems':true}", "[1,true,0,false,[1],[true]]");
}
END_TEST

START_TEST(length_counts_code_points)
{
    /* "日本語" is 9 bytes, 3 code points; U+1F600 is 4 bytes, 1 point. */
    expect_valid("{'minLength':3,'maxLength':3}", "'\xe6\x97\xa5\xe6\x9c\xac"
                                                  "\xe8\xaa\x9e'");
    expect_one("{'minLength':2}", "'\\ud83d\\ude00'", "",
               "expected string of at least 2 characters, got 1: "
               "\"\xf0\x9f\x98\x80\"");
    expect_valid("{'maxLength':1}", "'\\ud83d\\ude00'");
}
END_TEST

START_TEST(pointers_are_escaped)
{
    wex__schema_result r;

    ck_assert_int_eq(run("{'properties':{'a/b':{'items':{'type':'integer'}},"
                         "'c~d':{'type':'string'}}}",
                         "{'a/b':[1,2,'x'],'c~d':0}", &r),
                     2);
    ck_assert_str_eq(r.errors[0].pointer, "/a~1b/2");
    ck_assert_str_eq(r.errors[1].pointer, "/c~0d");
    wex__schema_result_free(&r);
}
END_TEST

START_TEST(collects_all_errors_in_order)
{
    wex__schema_result r;

    ck_assert_int_eq(run("{'type':'object','required':['a','b'],"
                         "'properties':{'c':{'type':'string'},"
                         "'d':{'maximum':1}},'additionalProperties':false}",
                         "{'c':1,'d':2,'e':3}", &r),
                     5);
    ck_assert_str_eq(r.errors[0].message, "missing required property \"a\"");
    ck_assert_str_eq(r.errors[1].message, "missing required property \"b\"");
    ck_assert_str_eq(r.errors[2].pointer, "/c");
    ck_assert_str_eq(r.errors[3].message, "expected number <= 1, got 2");
    ck_assert_str_eq(r.errors[4].message,
                     "unknown property \"e\" (allowed: c, d)");
    wex__schema_result_free(&r);
}
END_TEST

static const char transport[] =
    "{'oneOf':[{'$ref':'#/$defs/shm'},{'$ref':'#/definitions/ucx'}],"
    " '$defs':{'shm':{'type':'object','required':['kind','size'],"
    "   'properties':{'kind':{'const':'shm'},"
    "                 'size':{'type':'integer','minimum':1}}}},"
    " 'definitions':{'ucx':{'type':'object','required':['kind'],"
    "   'properties':{'kind':{'enum':['ucx','ucx-rc']}}}}}";

START_TEST(one_of_discriminator)
{
    expect_valid(transport, "{'kind':'ucx-rc'}");
    expect_one(transport, "{'kind':'shm','size':0}", "",
               "expected exactly one of 2 alternatives to match, 0 matched; "
               "\"kind\" is \"shm\", which selects alternative 0; it failed "
               "at /size: expected integer >= 1, got 0");
    expect_one(transport, "{'kind':'tcp'}", "",
               "expected exactly one of 2 alternatives to match, 0 matched; "
               "property \"kind\" selects the alternative and must be one of "
               "\"shm\", \"ucx\", \"ucx-rc\", got \"tcp\"");
    expect_one(transport, "{'size':1}", "",
               "expected exactly one of 2 alternatives to match, 0 matched; "
               "missing property \"kind\", which selects the alternative "
               "(one of \"shm\", \"ucx\", \"ucx-rc\")");
}
END_TEST

START_TEST(one_of_counts)
{
    const char *schema = "{'oneOf':[{'type':'number'},{'type':'integer'},"
                         "{'type':'number','minimum':0}]}";

    expect_valid(schema, "-1.5");
    expect_one(schema, "3", "",
               "expected exactly one of 3 alternatives to match, "
               "3 matched (alternatives 0, 1, 2)");
    expect_one(schema, "'x'", "",
               "expected exactly one of 3 alternatives to match, 0 matched; "
               "alternative 0 failed: expected number, got string \"x\"");
    /* The alternative that got furthest into the document is quoted. */
    expect_one("{'oneOf':[{'type':'string'},"
               "{'properties':{'a':{'properties':{'b':{'type':'null'}}}}}]}",
               "{'a':{'b':1}}", "",
               "expected exactly one of 2 alternatives to match, 0 matched; "
               "alternative 1 failed at /a/b: expected null, got number 1");
}
END_TEST

START_TEST(any_of_reports_once)
{
    const char *schema = "{'properties':{'x':{'anyOf':[{'type':'string'},"
                         "{'type':'integer','minimum':10}]}}}";

    expect_valid(schema, "{'x':'s'}");
    expect_valid(schema, "{'x':12}");
    expect_one(schema, "{'x':5}", "/x",
               "expected at least one of 2 alternatives to match, 0 matched; "
               "alternative 1 failed: expected integer >= 10, got 5");
}
END_TEST

START_TEST(all_of_and_ref_siblings)
{
    wex__schema_result r;

    ck_assert_int_eq(run("{'$ref':'#/$defs/n','maximum':5,'allOf':"
                         "[{'minimum':10},{'type':'string'}],"
                         "'$defs':{'n':{'type':'integer'}}}",
                         "7", &r),
                     3);
    ck_assert_str_eq(r.errors[0].message, "expected number <= 5, got 7");
    ck_assert_str_eq(r.errors[1].message, "expected number >= 10, got 7");
    ck_assert_str_eq(r.errors[2].message, "expected string, got number 7");
    wex__schema_result_free(&r);
}
END_TEST

START_TEST(refs_resolve)
{
    const char *schema = "{'$defs':{'a/b':{'type':'integer'},"
                         "'c~d':{'$ref':'#/definitions/e'}},"
                         "'definitions':{'e':{'type':'string'}},"
                         "'properties':{'x':{'$ref':'#/$defs/a~1b'},"
                         "'y':{'$ref':'#/$defs/c~0d'},"
                         "'z':{'$ref':'#/properties/x'}}}";

    expect_valid(schema, "{'x':1,'y':'s','z':2}");
    expect_one(schema, "{'z':'no'}", "/z",
               "expected integer, got string \"no\"");
}
END_TEST

START_TEST(ref_cycles_are_malformed)
{
    expect_malformed("{'$ref':'#'}", "1",
                     "schema:", "followed 64 times without descending");
    expect_malformed("{'$defs':{'a':{'allOf':[{'$ref':'#/$defs/b'}]},"
                     "'b':{'$ref':'#/$defs/a'}},'properties':{'p':"
                     "{'$ref':'#/$defs/a'}}}",
                     "{'p':1}", "schema:/$defs/a",
                     "(a reference cycle) at "
                     "document location \"/p\"");
    /* A cycle the document never reaches is harmless. */
    expect_valid("{'$defs':{'a':{'$ref':'#/$defs/a'}},'properties':"
                 "{'p':{'$ref':'#/$defs/a'}}}",
                 "{}");
}
END_TEST

START_TEST(recursive_schema_deep_document)
{
    cJSON *schema = json("{'type':'array','items':{'$ref':'#'}}");
    cJSON *doc = nested_arrays(WEX__SCHEMA_MAX_DEPTH + 1);
    wex__schema_result r;

    /* 257 arrays: the innermost is at depth 256, the deepest allowed. */
    ck_assert_int_eq(wex__schema_validate(schema, doc, &r), 0);
    wex__schema_result_free(&r);
    cJSON_Delete(doc);

    doc = nested_arrays(300);
    ck_assert_int_eq(wex__schema_validate(schema, doc, &r), 1);
    ck_assert_str_eq(r.errors[0].message,
                     "document nested deeper than 256 levels");
    ck_assert_uint_eq(strlen(r.errors[0].pointer), 2 * 257);
    wex__schema_result_free(&r);
    cJSON_Delete(doc);
    cJSON_Delete(schema);
}
END_TEST

START_TEST(evaluation_depth_is_bounded)
{
    /* Ten schemas per document level: 250 levels need 2500 frames. */
    cJSON *schema = json("{'items':{'allOf':[{'allOf':[{'allOf':[{'allOf':"
                         "[{'allOf':[{'allOf':[{'allOf':[{'allOf':"
                         "[{'$ref':'#'}]}]}]}]}]}]}]}]}}");
    cJSON *doc = nested_arrays(250);
    wex__schema_result r;

    ck_assert_int_eq(wex__schema_validate(schema, doc, &r), -EINVAL);
    ck_assert_uint_eq(r.count, 1);
    ck_assert_str_eq(r.errors[0].pointer, "schema:");
    ck_assert_ptr_nonnull(
        strstr(r.errors[0].message, "evaluation nested deeper than 2048"));
    wex__schema_result_free(&r);
    cJSON_Delete(doc);
    cJSON_Delete(schema);
}
END_TEST

START_TEST(long_reference_chains)
{
    /* d0 -> d1 -> ... -> d149, each one property deeper: the up-front
     * check must not count the chain as one deeply nested schema. */
    cJSON *schema = json("{'$ref':'#/$defs/d0','$defs':{}}");
    cJSON *defs = cJSON_GetObjectItem(schema, "$defs");
    cJSON *doc = json("{}"), *inner = doc;
    wex__schema_result r;
    char name[16], text[96];
    int i;

    for (i = 0; i < 150; i++) {
        snprintf(name, sizeof(name), "d%d", i);
        snprintf(text, sizeof(text),
                 "{'properties':{'x':{'$ref':'#/$defs/d%d'}}}", i + 1);
        cJSON_AddItemToObject(defs, name,
                              i < 149 ? json(text) : json("{'minimum':1}"));
        inner = cJSON_AddObjectToObject(inner, "x");
    }
    ck_assert_int_eq(wex__schema_validate(schema, doc, &r), 0);
    wex__schema_result_free(&r);
    cJSON_Delete(doc);
    cJSON_Delete(schema);
}
END_TEST

START_TEST(malformed_schemas)
{
    expect_malformed("{'properties':{'a':{'type':'strnig'}}}", "{}",
                     "schema:/properties/a/type", "got string \"strnig\"");
    expect_malformed("{'type':['string','string']}", "1", "schema:/type/1",
                     "expected distinct items");
    expect_malformed("{'items':{'minLength':-1}}", "[]",
                     "schema:/items/minLength",
                     "expected a non-negative integer, got number -1");
    expect_malformed("{'maxItems':1.5}", "[]", "schema:/maxItems",
                     "non-negative integer");
    expect_malformed("{'anyOf':[]}", "1", "schema:/anyOf",
                     "non-empty array of schemas");
    expect_malformed("{'oneOf':[{},3]}", "1", "schema:/oneOf/1",
                     "expected a schema (an object or true/false), got "
                     "number 3");
    expect_malformed("{'required':['a',1]}", "{}", "schema:/required/1",
                     "expected a property name");
    expect_malformed("{'minimum':'1'}", "1", "schema:/minimum",
                     "expected a number");
    expect_malformed("{'uniqueItems':1}", "1", "schema:/uniqueItems",
                     "expected true or false");
    expect_malformed("{'$defs':{'x':{'enum':1}}}", "1", "schema:/$defs/x/enum",
                     "expected an array");
    expect_malformed("{'properties':{'a':{'$ref':'#/$defs/none'}}}", "{}",
                     "schema:/properties/a/$ref",
                     "cannot resolve $ref \"#/$defs/none\"");
    expect_malformed("{'$ref':'https://example.com/s.json'}", "1",
                     "schema:/$ref", "only local references");
    expect_malformed("{'$ref':'#/items/0'}", "1", "schema:/$ref",
                     "cannot resolve");
    expect_malformed("[]", "1", "schema:", "expected a schema");
    expect_malformed("{'$defs':{'a':{'$ref':'#/b'}},'b':'str'}", "1",
                     "schema:/b", "expected a schema");
    /* A $ref target under an unknown keyword is checked at its location. */
    expect_malformed("{'$ref':'#/x/y','x':{'y':{'maxLength':'2'}}}", "'s'",
                     "schema:/x/y/maxLength", "non-negative integer");
}
END_TEST

START_TEST(boolean_schemas)
{
    expect_valid("true", "{'a':[1,null]}");
    expect_one("false", "null", "",
               "expected no value here (the schema is false), got null");
    expect_one("{'properties':{'old':false}}", "{'old':1}", "/old",
               "expected no value here (the schema is false), got 1");
    expect_valid("{'items':false}", "[]");
    expect_one("{'additionalProperties':{'type':'integer'}}", "{'a':'x'}", "/a",
               "expected integer, got string \"x\"");
}
END_TEST

START_TEST(unknown_keywords_ignored)
{
    expect_valid("{'$schema':'https://json-schema.org/draft/2020-12/schema',"
                 "'$id':'https://example.com/x','title':'t','description':'d',"
                 "'examples':[1],'pattern':'^a$','format':'email',"
                 "'minProperties':'not even checked','type':'string'}",
                 "'b'");
}
END_TEST

START_TEST(messages_stay_one_line)
{
    wex__schema_result r;
    size_t i;

    ck_assert_int_eq(run("{'additionalProperties':false,"
                         "'properties':{'x':{'const':'0123456789012345678901"
                         "23456789012345678901234567890123456789012345678901"
                         "23456789'}}}",
                         "{'a\\nb':1,'x':'\\u0001'}", &r),
                     2);
    for (i = 0; i < r.count; i++)
        ck_assert_ptr_null(strchr(r.errors[i].message, '\n'));
    /* Long values are cut to 80 bytes, the string's quote included. */
    ck_assert_str_eq(r.errors[0].message,
                     "expected \"012345678901234567890123456789012345678901"
                     "2345678901234567890123456789012345..., got \"\\u0001\"");
    ck_assert_str_eq(r.errors[1].message,
                     "unknown property \"a\\nb\" (allowed: x)");
    wex__schema_result_free(&r);
}
END_TEST

START_TEST(null_arguments)
{
    cJSON *schema = json("{}");
    wex__schema_result r = {0};

    ck_assert_int_eq(wex__schema_validate(schema, NULL, NULL), -EINVAL);
    ck_assert_int_eq(wex__schema_validate(NULL, schema, &r), -EINVAL);
    ck_assert_uint_eq(r.count, 1);
    ck_assert_str_eq(r.errors[0].pointer, "schema:");
    wex__schema_result_free(&r);
    wex__schema_result_free(&r);
    wex__schema_result_free(NULL);
    ck_assert_int_eq(wex__schema_apply_defaults(NULL, schema), -EINVAL);
    ck_assert_int_eq(wex__schema_apply_defaults(schema, NULL), -EINVAL);
    cJSON_Delete(schema);
}
END_TEST

/* Applies defaults and compares with the expected document. */
static void expect_filled(const char *schema_text, const char *doc_text,
                          const char *want_text)
{
    cJSON *schema = json(schema_text), *doc = json(doc_text);
    cJSON *want = json(want_text);
    char *got;

    ck_assert_int_eq(wex__schema_apply_defaults(schema, doc), 0);
    got = cJSON_PrintUnformatted(doc);
    ck_assert_msg(cJSON_Compare(doc, want, 1), "got %s", got);
    free(got);
    cJSON_Delete(want);
    cJSON_Delete(doc);
    cJSON_Delete(schema);
}

START_TEST(defaults_fill_nested)
{
    const char *schema =
        "{'properties':{"
        "  'threads':{'type':'integer','default':4},"
        "  'transport':{'$ref':'#/$defs/transport'},"
        "  'plugins':{'items':{'properties':{'enabled':{'default':true}}}},"
        "  'choice':{'oneOf':[{'properties':{'x':{'default':1}}}]}},"
        " '$defs':{'transport':{'default':{},'properties':{"
        "   'kind':{'default':'shm'},"
        "   'opts':{'$ref':'#/definitions/opts'}}}},"
        " 'definitions':{'opts':{'default':{'size':64}}}}";

    expect_filled(schema, "{'choice':{}, 'plugins':[{},{'enabled':false}]}",
                  "{'choice':{},'plugins':[{'enabled':true},"
                  "{'enabled':false}],'threads':4,"
                  "'transport':{'kind':'shm','opts':{'size':64}}}");
    /* Present values are kept; defaults fill in beneath them. */
    expect_filled(schema, "{'threads':1,'transport':{'kind':'ucx'}}",
                  "{'threads':1,'transport':{'kind':'ucx',"
                  "'opts':{'size':64}}}");
    /* allOf applies: every branch holds. */
    expect_filled("{'allOf':[{'properties':{'a':{'default':[1]}}}]}", "{}",
                  "{'a':[1]}");
    /* Non-object documents are left alone. */
    expect_filled(schema, "[1]", "[1]");
}
END_TEST

START_TEST(defaults_are_deep_copies)
{
    cJSON *schema = json("{'properties':{'o':{'default':{'list':[1]}}}}");
    cJSON *pristine = cJSON_Duplicate(schema, 1);
    cJSON *doc = json("{}");

    ck_assert_int_eq(wex__schema_apply_defaults(schema, doc), 0);
    cJSON_AddItemToArray(
        cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "o"), "list"),
        cJSON_CreateNumber(2));
    ck_assert(cJSON_Compare(schema, pristine, 1));
    cJSON_Delete(doc);
    cJSON_Delete(pristine);
    cJSON_Delete(schema);
}
END_TEST

START_TEST(defaults_survive_ref_cycles)
{
    expect_filled("{'$ref':'#','properties':{'a':{'default':1}}}", "{}",
                  "{'a':1}");
    /* A default that implies itself again is inserted once per path. */
    expect_filled("{'properties':{'c':{'$ref':'#'}},"
                  "'required':['c'],'default':{}}",
                  "{'c':{'c':{}}}", "{'c':{'c':{'c':{}}}}");
}
END_TEST

static Suite *jsonschema_suite(void)
{
    Suite *s = suite_create("jsonschema");
    TCase *tc = tcase_create("validate");
    TCase *defaults = tcase_create("defaults");

    tcase_add_test(tc, documented_messages);
    tcase_add_test(tc, type_messages);
    tcase_add_test(tc, integer_semantics);
    tcase_add_test(tc, length_counts_code_points);
    tcase_add_test(tc, pointers_are_escaped);
    tcase_add_test(tc, collects_all_errors_in_order);
    tcase_add_test(tc, one_of_discriminator);
    tcase_add_test(tc, one_of_counts);
    tcase_add_test(tc, any_of_reports_once);
    tcase_add_test(tc, all_of_and_ref_siblings);
    tcase_add_test(tc, refs_resolve);
    tcase_add_test(tc, ref_cycles_are_malformed);
    tcase_add_test(tc, recursive_schema_deep_document);
    tcase_add_test(tc, evaluation_depth_is_bounded);
    tcase_add_test(tc, long_reference_chains);
    tcase_add_test(tc, malformed_schemas);
    tcase_add_test(tc, boolean_schemas);
    tcase_add_test(tc, unknown_keywords_ignored);
    tcase_add_test(tc, messages_stay_one_line);
    tcase_add_test(tc, null_arguments);
    tcase_add_test(defaults, defaults_fill_nested);
    tcase_add_test(defaults, defaults_are_deep_copies);
    tcase_add_test(defaults, defaults_survive_ref_cycles);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, defaults);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(jsonschema_suite());
    int failed;

    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
