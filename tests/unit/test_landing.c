/*
 * The landing board (host/lib/job/move/landing.c): a destination digests each
 * operation as soon as its source says it has landed.
 *
 * - Over shm, one source and two destinations, each a process, sync three
 *   steps with digests: every step verifies and commits, every byte is
 *   right, and each destination digested operations early. Were a source
 *   to tell before its bytes had landed, an early digest would not match
 *   and the step would fail.
 * - A destination's watch, driven by hand: a word of another try is
 *   ignored, a count digests exactly that many of the source's ops (in
 *   the source's order, with the digest the late check computes), a count
 *   past the source's ops is clamped, and a board on which nothing moves
 *   is left after its quiet time.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_run.h"
#include "clock.h"
#include "landing.h"
#include "job.h"

#define TOKEN "landing-test"
#define STEPS 3

static char dir[64], model[128], job_text[1024];

static void setup(void)
{
    static const char config[] =
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"head_dim\": 32,"
        " \"hidden_size\": 256, \"intermediate_size\": 512,"
        " \"num_attention_heads\": 8, \"num_hidden_layers\": 4,"
        " \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06,"
        " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
        " \"vocab_size\": 4096}";
    FILE *f;

    snprintf(dir, sizeof(dir), "/tmp/wex-test-landing-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(model, sizeof(model), "%s/config.json", dir);
    f = fopen(model, "w");
    ck_assert_ptr_nonnull(f);
    fputs(config, f);
    fclose(f);
    snprintf(job_text, sizeof(job_text),
             "{\"model\": \"%s\", \"source\": {\"engine\": \"hf\"},"
             " \"destination\": {\"engine\": \"vllm\","
             " \"parallel\": {\"tp\": 2}},"
             " \"transport\": \"shm\", \"verify\": \"digest\"}",
             model);
}

static void teardown(void)
{
    unlink(model);
    rmdir(dir);
}

static unsigned char pattern(uint64_t tensor, uint64_t offset, uint64_t step)
{
    uint64_t h = (tensor + 1) * 0x9e3779b97f4a7c15ull ^ offset ^ step << 40;

    h ^= h >> 31;
    return (unsigned char)(h * 0xbf58476d1ce4e5b9ull >> 56);
}

static size_t early_count(const wex_job *job)
{
    size_t n = 0;

    for (size_t i = 0; i < job->op_count; i++)
        n += job->dst.early[i];
    return n;
}

/* One rank of the three. Exit status: 0 right; 1 an API call failed;
 * 3 wrong bytes; 5 nothing digested early. */
static int rank_main(uint32_t side, uint64_t rank, const char *address)
{
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    wex_job *job = NULL;
    unsigned char **mem;
    uint64_t count, bad = 0;
    size_t early = 0;
    int rc = 1;

    if (wex_job_open(job_text, side, rank, &opts, &job) != WEX_OK) {
        fprintf(stderr, "open: %s\n", wex_last_error());
        return 1;
    }
    if (!wex__landing_on(job)) {
        fprintf(stderr, "shm offers no landing board\n");
        wex_job_close(job);
        return 1;
    }
    count = wex_job_tensor_count(job);
    mem = calloc(count, sizeof(*mem));
    for (uint64_t i = 0; i < count; i++)
        if (wex_job_alloc(job, i, (void **)&mem[i]) != WEX_OK)
            goto out;
    for (uint64_t step = 1; step <= STEPS; step++) {
        wex_sync_report r;

        for (uint64_t i = 0; side == WEX_SIDE_SOURCE && i < count; i++)
            for (uint64_t b = 0; b < job->bind[i].bytes; b++)
                mem[i][b] = pattern(i, b, step);
        memset(&r, 0, sizeof(r));
        r.struct_size = sizeof(r);
        if (wex_sync(job, step, &r) != WEX_OK || r.verified != 1 ||
            r.attempts != 1) {
            fprintf(stderr, "step %llu: %s\n", (unsigned long long)step,
                    wex_last_error());
            goto out;
        }
        if (side == WEX_SIDE_DESTINATION) {
            early += early_count(job);
            if (r.committed_step != step)
                goto out;
        }
    }
    rc = 0;
    if (side == WEX_SIDE_DESTINATION) {
        /* the last step's early digests are what a late check reads:
         * nothing landed after the source said it had */
        for (size_t k = 0; k < job->op_count; k++)
            bad +=
                job->dst.early[k] && job->scratch.digests[k] !=
                                         wex__digest_landed(job, &job->ops[k]);
        rc = bad ? 3 : early == 0 ? 5 : 0;
        fprintf(stderr,
                "destination %llu: %zu of %zu operations digested "
                "as they landed over %d steps\n",
                (unsigned long long)rank, early, job->op_count * STEPS, STEPS);
    }
out:
    wex_job_close(job);
    free(mem);
    return rc;
}

START_TEST(checks_each_op_as_it_lands)
{
    pid_t ranks[3];
    int pipes[3][2], status;
    wex_store *store = NULL;

    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(pipe(pipes[i]), 0);
        ranks[i] = fork();
        if (ranks[i] == 0) {
            char got[300] = "";
            ssize_t n = read(pipes[i][0], got, sizeof(got) - 1);
            if (n <= 0)
                _exit(4);
            _exit(rank_main(i == 0 ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION,
                            i == 0 ? 0 : (uint64_t)(i - 1), got));
        }
        close(pipes[i][0]);
    }
    ck_assert_int_eq(wex_store_open("127.0.0.1:0", TOKEN, &store), WEX_OK);
    for (int i = 0; i < 3; i++) {
        const char *a = wex_store_address(store);
        ck_assert_int_eq(write(pipes[i][1], a, strlen(a)), (int)strlen(a));
        close(pipes[i][1]);
    }
    for (int i = 0; i < 3; i++) {
        waitpid(ranks[i], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "rank %d exited %d (3: wrong early digest, 5: none "
                      "early)",
                      i, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    wex_store_close(store);
}
END_TEST

/* Writes source `src`'s word on the board. */
static void say(wex_job *job, uint64_t src, uint32_t tag, uint32_t count)
{
    uint64_t word = (uint64_t)tag << 32 | count;

    memcpy((unsigned char *)job->dst.board + src * 64, &word, sizeof(word));
}

START_TEST(watch_takes_this_tries_words_only)
{
    wex_job_options opts = {sizeof(opts), 0, "127.0.0.1:1", TOKEN, NULL};
    wex_job *job = NULL;
    unsigned char key[WEX_TRANSPORT_KEY_MAX];
    uint64_t len = sizeof(key);
    uint32_t tag = wex__landing_tag(7, 0);
    size_t of_first;
    double t0;

    /* opened, never connected: the watch reads its own board only */
    ck_assert_msg(
        wex_job_open(job_text, WEX_SIDE_DESTINATION, 1, &opts, &job) == WEX_OK,
        "%s", wex_last_error());
    for (uint64_t i = 0; i < wex_job_tensor_count(job); i++) {
        void *m = NULL;
        ck_assert_int_eq(wex_job_alloc(job, i, &m), WEX_OK);
        memset(m, (int)i, job->bind[i].bytes);
    }
    ck_assert_int_eq(wex__landing_key(job, key, &len), WEX_OK);
    ck_assert_ptr_nonnull(job->dst.board);
    ck_assert_uint_eq(job->peer_count, 1);
    of_first = job->scratch.peer_first[1] - job->scratch.peer_first[0];
    ck_assert_uint_gt(of_first, 3);
    ck_assert_uint_ne(tag, 0);
    ck_assert_uint_ne(tag, wex__landing_tag(7, 1));
    ck_assert_uint_ne(tag, wex__landing_tag(8, 0));

    /* another try's word, however far it got: nothing, after the quiet
     * time */
    say(job, job->peers[0], wex__landing_tag(7, 1), (uint32_t)of_first);
    t0 = wex__now();
    wex__landing_watch(job, tag);
    ck_assert_uint_eq(early_count(job), 0);
    ck_assert(wex__now() - t0 >= 0.09);

    /* this try's: exactly the first three, in the source's order */
    say(job, job->peers[0], tag, 3);
    wex__landing_watch(job, tag);
    ck_assert_uint_eq(early_count(job), 3);
    for (size_t k = 0; k < 3; k++) {
        size_t i = job->scratch.peer_ops[job->scratch.peer_first[0] + k];
        ck_assert(job->dst.early[i]);
        ck_assert_uint_eq(job->scratch.digests[i],
                          wex__digest_landed(job, &job->ops[i]));
    }

    /* a count past the source's ops: all of them, and no further */
    say(job, job->peers[0], tag, UINT32_MAX);
    t0 = wex__now();
    wex__landing_watch(job, tag);
    ck_assert_uint_eq(early_count(job), job->op_count);
    ck_assert(wex__now() - t0 < 0.09); /* done, not waited out */
    wex_job_close(job);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("landing");
    TCase *tc = tcase_create("landing");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, checks_each_op_as_it_lands);
    tcase_add_test(tc, watch_takes_this_tries_words_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(suite());
}
