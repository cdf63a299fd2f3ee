/*
 * Checkpoints: the safetensors header parser against every way a header
 * can lie (each refused in one line naming the file and the tensor), and
 * the writer and reader against each other on a real model's catalog:
 * sharded and single-file round trips, the index, a missing shard, a
 * model that does not match, a target that is not empty, and a save that
 * is abandoned leaving nothing. tests/python/test_checkpoint.py checks
 * both directions against the safetensors library itself.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wex/bytes.h>

#include "check_run.h"
#include "checkpoint.h"
#include "error.h"

#define TINY WEX_TEST_DATA "/models/DeepSeek-V3-tiny-fp8.config.json"

static unsigned char file[4096];
static uint64_t file_size;

/* A file of the header `json` and `data` bytes of data. */
static void make(const char *json, uint64_t data)
{
    uint64_t n = strlen(json);

    wex_put_le(file, n, 8);
    memcpy(file + 8, json, n);
    memset(file + 8 + n, 0x5a, data);
    file_size = 8 + n + data;
}

static wex_status parse(wex__st_header *h)
{
    return wex__st_parse("f.safetensors", file, file_size, file_size, h);
}

static void refused(const char *json, uint64_t data, const char *why)
{
    wex__st_header h;

    make(json, data);
    ck_assert_int_eq(parse(&h), WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(), why) != NULL, "%s: got '%s'", why,
                  wex__last_error());
    ck_assert_ptr_null(strchr(wex__last_error(), '\n'));
    ck_assert_ptr_null(h.tensors);
}

START_TEST(a_header_is_read)
{
    wex__st_header h;
    const wex__st_tensor *b;

    make(
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]},"
        "\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
        "\"e\":{\"dtype\":\"F8_E4M3\",\"shape\":[0],\"data_offsets\":[16,16]}}",
        16);
    ck_assert_int_eq(parse(&h), WEX_OK);
    ck_assert_uint_eq(h.count, 3);
    ck_assert_uint_eq(h.data_size, 16);
    ck_assert_str_eq(h.tensors[0].name, "a"); /* sorted by offset */
    b = wex__st_find(&h, "b");
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->dtype, WEX_DTYPE_F32);
    ck_assert_uint_eq(b->begin, 12);
    ck_assert_uint_eq(h.tensors[0].ndim, 2);
    ck_assert_uint_eq(h.tensors[0].shape[1], 3);
    wex__st_free(&h);
}
END_TEST

START_TEST(every_lie_of_a_header_is_refused)
{
    wex__st_header h;

    /* the header's length */
    file_size = 5;
    ck_assert_int_eq(parse(&h), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "shorter than the 8-byte"));
    make("{}", 0);
    wex_put_le(file, 4000, 8);
    ck_assert_int_eq(parse(&h), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(),
                                 "header length 4000 runs "
                                 "past the file's 10 bytes"));
    make("{}", 0);
    wex_put_le(file, UINT64_C(1) << 40, 8);
    ck_assert_int_eq(parse(&h), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "is not between 2 and"));
    make("{\"a\":{}}", 0);
    ck_assert_int_eq(wex__st_parse("f", file, 9, file_size, &h),
                     WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(), "truncated before the end"));
    /* the JSON */
    refused("[1, 2]", 0, "f.safetensors: header: expected a JSON object");
    refused("{\"a\":", 0, "header: expected a JSON object");
    refused("{\"a\":3}", 0, "tensor a: expected an object");
    refused("{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}",
            1, "tensor a: dtype \"Q4\" is not one wex knows");
    refused("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
            "tensor a: dtype: expected a string");
    refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}",
            1, "tensor a: shape: expected whole numbers");
    refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
            "\"data_offsets\":[0,1]}}",
            1, "shape: expected an array of at most 8");
    refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,0]}}",
            1, "data_offsets: expected [begin, end] with begin <= end");
    refused("{\"__metadata__\":{\"format\":1}}", 0,
            "__metadata__/format: expected a string");
    /* the data */
    refused("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}",
            6,
            "tensor a: data_offsets end 8 is past the data's 6 bytes (a "
            "truncated file?)");
    refused("{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,6]}}",
            6, "tensor a: BF16 x 4 elements is not its data_offsets' 6 bytes");
    refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
            "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
            6, "tensors a and b overlap");
    /* an empty tensor sorted between two that overlap hides nothing */
    refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
            "\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[1,1]},"
            "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
            6, "tensors a and b overlap");
    refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
            "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
            2, "tensor a: named twice");
}
END_TEST

static wex_model *model;
static char dir[256], out[300];

static void setup(void)
{
    ck_assert_int_eq(wex__model_load(TINY, &model), WEX_OK);
    snprintf(dir, sizeof(dir), "/tmp/wex-test-checkpoint-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(out, sizeof(out), "%s/ck", dir);
}

static void teardown(void)
{
    char cmd[300];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    wex__model_free(model);
}

/* The byte at offset i of canonical tensor c in the test's checkpoint. */
static unsigned char pattern(uint64_t c, uint64_t i)
{
    return (unsigned char)(c * 131 + i * 7 + (i >> 8));
}

static void save(uint64_t shard_bytes)
{
    wex__ckpt_plan p;
    char *staging;

    ck_assert_int_eq(wex__ckpt_plan_make(model, shard_bytes, &p), WEX_OK);
    staging = wex__ckpt_staging_dir(out, "test");
    ck_assert_int_eq(wex__ckpt_create(&p, out, staging), WEX_OK);
    for (uint64_t c = 0; c < model->count; c++) {
        uint64_t n = model->tensors[c].bytes;
        unsigned char *b = malloc(n + 1);
        for (uint64_t i = 0; i < n; i++)
            b[i] = pattern(c, i);
        /* in two writes, the second first: any order lands */
        ck_assert_int_eq(
            wex__ckpt_write(&p, staging, c, n / 2, b + n / 2, n - n / 2),
            WEX_OK);
        ck_assert_int_eq(wex__ckpt_write(&p, staging, c, 0, b, n / 2), WEX_OK);
        free(b);
    }
    ck_assert_int_eq(access(out, F_OK), -1); /* nothing looks whole yet */
    ck_assert_int_eq(wex__ckpt_commit(&p, out, staging), WEX_OK);
    ck_assert_int_eq(access(staging, F_OK), -1);
    free(staging);
    wex__ckpt_plan_free(&p);
}

static void read_back(size_t files)
{
    wex__checkpoint ck;

    ck_assert_int_eq(wex__checkpoint_open(out, model, NULL, NULL, &ck), WEX_OK);
    ck_assert_uint_eq(ck.nfiles, files);
    ck_assert_uint_eq(ck.extra, 0);
    for (uint64_t c = 0; c < model->count; c++) {
        uint64_t n = model->tensors[c].bytes;
        unsigned char *want = malloc(n + 1);
        for (uint64_t i = 0; i < n; i++)
            want[i] = pattern(c, i);
        ck_assert_msg(memcmp(wex__checkpoint_data(&ck, c), want, n) == 0,
                      "%s differs", model->tensors[c].name);
        free(want);
    }
    for (size_t f = 0; f < ck.nfiles; f++)
        ck_assert_uint_eq(ck.files[f].header.data_start % 8, 0);
    wex__checkpoint_close(&ck);
}

START_TEST(one_file_round_trips)
{
    save(0);
    read_back(1);
}
END_TEST

START_TEST(shards_round_trip_with_their_index)
{
    char index[400];
    FILE *f;
    char text[256] = "";

    save(1000000);
    read_back(5);
    snprintf(index, sizeof(index), "%s/" WEX__CKPT_INDEX, out);
    f = fopen(index, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_gt(fread(text, 1, sizeof(text) - 1, f), 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "\"total_size\":\t4549248"));
}
END_TEST

static void lines(void *arg, const char *line)
{
    int *n = arg;

    (*n)++;
    ck_assert_ptr_null(strchr(line, '\n'));
}

START_TEST(a_checkpoint_of_another_model_is_refused_per_tensor)
{
    wex_model *other;
    wex__checkpoint ck;
    int n = 0;

    save(0);
    ck_assert_int_eq(
        wex__model_load(WEX_MODELS_DIR "/Qwen3-0.6B.config.json", &other),
        WEX_OK);
    ck_assert_int_eq(wex__checkpoint_open(out, other, lines, &n, &ck),
                     WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(),
               "model.safetensors: tensor model.embed_tokens.weight: "
               "expected BF16 [151936, 1024], got BF16 [1024, 256]"));
    ck_assert_ptr_nonnull(strstr(
        wex__last_error(), "(and more: 'wex check' lists every mismatch)"));
    ck_assert_int_gt(
        n, 20); /* every shared name mismatched, every other missing */
    wex__model_free(other);
}
END_TEST

/* Writes model.safetensors holding every tensor of the catalog, tensor
 * `wide` stored as `stored` (float32: its values 1 + 2^-8 and
 * 1 + 3 * 2^-9 in turn), the others as pattern() says. */
static void save_one_wide(uint64_t wide, uint32_t stored)
{
    char path[400], *json = malloc(1 << 20);
    uint64_t at = 0, used = 0;
    FILE *f;

    used += (uint64_t)sprintf(json, "{");
    for (uint64_t c = 0; c < model->count; c++) {
        const wex__tensor *t = &model->tensors[c];
        uint32_t dtype = c == wide ? stored : t->dtype;
        uint64_t n = wex__tensor_elements(t) * wex_dtype_size(dtype);
        used += (uint64_t)sprintf(json + used,
                                  "%s\"%s\":{\"dtype\":\"%s\","
                                  "\"shape\":[",
                                  c ? "," : "", t->name, wex_dtype_name(dtype));
        for (uint32_t d = 0; d < t->ndim; d++)
            used += (uint64_t)sprintf(json + used, "%s%llu", d ? "," : "",
                                      (unsigned long long)t->shape[d]);
        used += (uint64_t)sprintf(
            json + used, "],\"data_offsets\":[%llu,%llu]}",
            (unsigned long long)at, (unsigned long long)(at + n));
        at += n;
    }
    used += (uint64_t)sprintf(json + used, "}");
    while (used % 8 != 0)
        json[used++] = ' ';
    mkdir(out, 0700);
    snprintf(path, sizeof(path), "%s/" WEX__CKPT_SINGLE, out);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    {
        unsigned char len[8];
        wex_put_le(len, used, 8);
        fwrite(len, 1, 8, f);
        fwrite(json, 1, used, f);
    }
    for (uint64_t c = 0; c < model->count; c++) {
        const wex__tensor *t = &model->tensors[c];
        uint64_t elements = wex__tensor_elements(t);
        if (c != wide) {
            for (uint64_t i = 0; i < t->bytes; i++)
                fputc(pattern(c, i), f);
            continue;
        }
        for (uint64_t i = 0; i < elements; i++) {
            float v = i % 2 ? 1.005859375f : 1.00390625f;
            fwrite(&v, 4, 1, f);
        }
    }
    fclose(f);
    free(json);
}

/* transformers 5 saves DeepSeek-V3's router weight in float32 where the
 * catalog (and the engines) hold bfloat16: read converted, to nearest
 * even; an fp8 tensor stored as float32 is no such case. */
START_TEST(a_float_tensor_stored_wider_is_read_converted)
{
    int64_t gate = wex__model_find(model, "model.layers.1.mlp.gate.weight");
    int64_t fp8 =
        wex__model_find(model, "model.layers.1.mlp.experts.0.up_proj.weight");
    const unsigned char *got;
    wex__checkpoint ck;

    ck_assert_int_ge(gate, 0);
    ck_assert_int_eq(model->tensors[gate].dtype, WEX_DTYPE_BF16);
    save_one_wide((uint64_t)gate, WEX_DTYPE_F32);
    ck_assert_int_eq(wex__checkpoint_open(out, model, NULL, NULL, &ck), WEX_OK);
    got = wex__checkpoint_data(&ck, (uint64_t)gate);
    for (uint64_t i = 0; i < wex__tensor_elements(&model->tensors[gate]); i++)
        /* 1 + 2^-8 ties to even 1.0; 1 + 3 * 2^-9 rounds up to 1 + 2^-7 */
        ck_assert_uint_eq(wex_get_le(got + 2 * i, 2), i % 2 ? 0x3f81 : 0x3f80);
    /* the others are read where they lie */
    ck_assert_uint_eq(wex__checkpoint_data(&ck, 0)[5], pattern(0, 5));
    wex__checkpoint_close(&ck);

    ck_assert_int_ge(fp8, 0);
    ck_assert_int_eq(model->tensors[fp8].dtype, WEX_DTYPE_F8_E4M3);
    save_one_wide((uint64_t)fp8, WEX_DTYPE_F32);
    ck_assert_int_eq(wex__checkpoint_open(out, model, NULL, NULL, &ck),
                     WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(
        wex__last_error(), "tensor model.layers.1.mlp.experts.0.up_proj."
                           "weight: expected F8_E4M3 [256, 256], got F32"));
}
END_TEST

START_TEST(an_index_naming_a_missing_shard_is_refused)
{
    wex__checkpoint ck;
    char shard[400];

    save(1000000);
    snprintf(shard, sizeof(shard), "%s/model-00003-of-00005.safetensors", out);
    ck_assert_int_eq(unlink(shard), 0);
    ck_assert_int_eq(wex__checkpoint_open(out, model, NULL, NULL, &ck),
                     WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(),
                                 "model.safetensors.index.json: /weight_map/"));
    ck_assert_ptr_nonnull(strstr(
        wex__last_error(), "names shard model-00003-of-00005.safetensors, "
                           "which is not there"));
}
END_TEST

START_TEST(no_checkpoint_at_all_is_refused)
{
    wex__checkpoint ck;

    ck_assert_int_eq(wex__checkpoint_open(dir, model, NULL, NULL, &ck),
                     WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(),
                                 "neither model.safetensors.index.json nor "
                                 "model.safetensors is there"));
}
END_TEST

START_TEST(a_save_never_lands_on_another_checkpoint)
{
    wex__ckpt_plan p;
    char *staging = wex__ckpt_staging_dir(out, "test");

    save(0);
    ck_assert_int_eq(wex__ckpt_plan_make(model, 0, &p), WEX_OK);
    ck_assert_int_eq(wex__ckpt_create(&p, out, staging), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(),
                                 "exists and is not empty: wex saves a "
                                 "checkpoint into a new directory"));
    read_back(1); /* untouched */
    free(staging);
    wex__ckpt_plan_free(&p);
}
END_TEST

START_TEST(an_abandoned_save_leaves_nothing)
{
    wex__ckpt_plan p;
    char *staging = wex__ckpt_staging_dir(out, "test");
    DIR *d;
    struct dirent *e;
    int entries = 0;

    ck_assert_int_eq(wex__ckpt_plan_make(model, 1000000, &p), WEX_OK);
    ck_assert_int_eq(wex__ckpt_create(&p, out, staging), WEX_OK);
    ck_assert_int_eq(wex__ckpt_write(&p, staging, 0, 0, "xy", 2), WEX_OK);
    wex__ckpt_abort(&p, staging);
    d = opendir(dir);
    while ((e = readdir(d)) != NULL)
        entries += e->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(entries, 0);
    free(staging);
    wex__ckpt_plan_free(&p);
}
END_TEST

/* The entries of the test's directory whose names contain `part`. */
static int entries_with(const char *part)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

START_TEST(a_killed_save_s_staging_is_removed_by_the_next_save)
{
    char keep[300], link[340], kept[320];
    pid_t pid = fork();
    int status;

    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* a save killed between create and commit */
        wex__ckpt_plan p;
        char *staging = wex__ckpt_staging_dir(out, "run4242-dead");
        if (wex__ckpt_plan_make(model, 1000000, &p) != WEX_OK ||
            wex__ckpt_create(&p, out, staging) != WEX_OK ||
            wex__ckpt_write(&p, staging, 0, 0, "xy", 2) != WEX_OK)
            _exit(1);
        _exit(9);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(status), 9);
    ck_assert_int_eq(entries_with("wex-saving-run4242-dead"),
                     1); /* it left that */
    /* a link of a staging name is not the save's to follow */
    snprintf(keep, sizeof(keep), "%s/keep", dir);
    snprintf(link, sizeof(link), "%s.wex-saving-link", out);
    ck_assert_int_eq(mkdir(keep, 0755), 0);
    snprintf(kept, sizeof(kept), "%s/file", keep);
    fclose(fopen(kept, "w"));
    ck_assert_int_eq(symlink(keep, link), 0);
    save(0); /* another job's save into the same directory */
    ck_assert_int_eq(entries_with("wex-saving-run4242-dead"), 0);
    ck_assert_int_eq(entries_with("wex-saving.lock"), 0);
    ck_assert_int_eq(access(kept, F_OK), 0);
    read_back(1);
}
END_TEST

START_TEST(a_live_save_s_staging_is_left_alone)
{
    wex__ckpt_plan live, other;
    char *live_staging = wex__ckpt_staging_dir(out, "live");
    char *other_staging = wex__ckpt_staging_dir(out, "other");

    ck_assert_int_eq(wex__ckpt_plan_make(model, 0, &live), WEX_OK);
    ck_assert_int_eq(wex__ckpt_plan_make(model, 0, &other), WEX_OK);
    ck_assert_int_eq(wex__ckpt_create(&live, out, live_staging), WEX_OK);
    ck_assert_int_eq(wex__ckpt_create(&other, out, other_staging),
                     WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(), "another save into") != NULL,
                  "got '%s'", wex__last_error());
    wex__ckpt_abort(&other, other_staging); /* what a refused rank 0 does */
    ck_assert_int_eq(access(live_staging, F_OK), 0);
    for (uint64_t c = 0; c < model->count; c++) {
        uint64_t n = model->tensors[c].bytes;
        unsigned char *b = malloc(n + 1);
        for (uint64_t i = 0; i < n; i++)
            b[i] = pattern(c, i);
        ck_assert_int_eq(wex__ckpt_write(&live, live_staging, c, 0, b, n),
                         WEX_OK);
        free(b);
    }
    ck_assert_int_eq(wex__ckpt_commit(&live, out, live_staging), WEX_OK);
    ck_assert_int_eq(entries_with("wex-saving"), 0);
    read_back(1);
    free(live_staging);
    free(other_staging);
    wex__ckpt_plan_free(&live);
    wex__ckpt_plan_free(&other);
}
END_TEST

START_TEST(a_fifo_for_a_shard_is_refused_at_once)
{
    wex__checkpoint ck;
    char *shard;

    ck_assert_int_eq(mkdir(out, 0755), 0);
    shard = wex__ckpt_path(out, "model.safetensors");
    ck_assert_int_eq(mkfifo(shard, 0644), 0);
    ck_assert_int_eq(wex__checkpoint_open(out, model, NULL, NULL, &ck),
                     WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(),
                         "model.safetensors: not a regular file (a FIFO)") !=
                      NULL,
                  "got '%s'", wex__last_error());
    unlink(shard);
    free(shard);
    rmdir(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *parser = tcase_create("safetensors");
    TCase *dirs = tcase_create("directories");
    TCase *fifo = tcase_create("not regular files");

    tcase_add_test(parser, a_header_is_read);
    tcase_add_test(parser, every_lie_of_a_header_is_refused);
    tcase_add_checked_fixture(dirs, setup, teardown);
    tcase_set_timeout(dirs,
                      120); /* megabytes written and read, under ASan too */
    tcase_add_test(dirs, one_file_round_trips);
    tcase_add_test(dirs, shards_round_trip_with_their_index);
    tcase_add_test(dirs, a_checkpoint_of_another_model_is_refused_per_tensor);
    tcase_add_test(dirs, a_float_tensor_stored_wider_is_read_converted);
    tcase_add_test(dirs, an_index_naming_a_missing_shard_is_refused);
    tcase_add_test(dirs, no_checkpoint_at_all_is_refused);
    tcase_add_test(dirs, a_save_never_lands_on_another_checkpoint);
    tcase_add_test(dirs, an_abandoned_save_leaves_nothing);
    tcase_add_test(dirs, a_killed_save_s_staging_is_removed_by_the_next_save);
    tcase_add_test(dirs, a_live_save_s_staging_is_left_alone);
    tcase_add_test(fifo, a_fifo_for_a_shard_is_refused_at_once);
    suite_add_tcase(s, parser);
    suite_add_tcase(s, dirs);
    tcase_add_checked_fixture(fifo, setup, teardown);
    tcase_set_timeout(fifo, 10); /* a FIFO waited on fails, not hangs */
    suite_add_tcase(s, fifo);
    return wex_test_run(s);
}
