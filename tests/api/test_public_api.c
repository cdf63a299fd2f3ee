/*
 * libwex.so as an application sees it: this program includes <wex/wex.h>
 * only and links libwex.so only, so it can use nothing but the exported
 * API. It starts `wex store`, then forks one source and two destination
 * processes that sync three steps of a small Qwen3 (hf into two hf
 * replicas over shm) and check every byte that landed, and it checks the
 * API's refusals of bad calls.
 *
 *   test_public_api WEX_COMMAND
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wex/wex.h>

#include "api_check.h"

#define TOKEN "public-api-test"
#define STEPS 3

static const char model_json[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"head_dim\": 16,"
    " \"hidden_size\": 64, \"intermediate_size\": 128,"
    " \"num_attention_heads\": 4, \"num_hidden_layers\": 2,"
    " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"vocab_size\": 1000}";

/* One rank: open, allocate, then per step fill (source) or check
 * (destination) every byte of every tensor. Returns the exit status. */
static int rank_main(const char *job_text, uint32_t side, uint64_t rank,
                     const char *address)
{
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    unsigned char **mem = NULL;
    wex_job *job = NULL;
    uint64_t count, bad = 0;
    int rc = 1;

    if (wex_job_open(job_text, side, rank, &opts, &job) != WEX_OK) {
        fprintf(stderr, "rank %u/%llu: open: %s\n", side,
                (unsigned long long)rank, wex_last_error());
        return 1;
    }
    count = wex_job_tensor_count(job);
    mem = calloc(count ? count : 1, sizeof(*mem));
    for (uint64_t i = 0; i < count; i++)
        if (wex_job_alloc(job, i, (void **)&mem[i]) != WEX_OK) {
            fprintf(stderr, "alloc %llu: %s\n", (unsigned long long)i,
                    wex_last_error());
            goto out;
        }
    for (uint64_t step = 1; step <= STEPS; step++) {
        wex_sync_report report;

        for (uint64_t i = 0; i < count && side == WEX_SIDE_SOURCE; i++) {
            wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
            wex_job_tensor(job, i, &t);
            for (uint64_t b = 0; b < t.bytes; b++)
                mem[i][b] = expected(t.name, b, step);
        }
        memset(&report, 0, sizeof(report));
        report.struct_size = sizeof(report);
        if (wex_sync(job, step, &report) != WEX_OK) {
            fprintf(stderr, "rank %u/%llu: step %llu: %s\n", side,
                    (unsigned long long)rank, (unsigned long long)step,
                    wex_last_error());
            goto out;
        }
        if (report.step != step || report.verified != 1 ||
            report.attempts != 1 || report.bytes == 0)
            goto out;
        if (side == WEX_SIDE_DESTINATION) {
            if (report.committed_step != step ||
                wex_job_committed_step(job) != step)
                goto out;
            for (uint64_t i = 0; i < count; i++) {
                wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
                wex_job_tensor(job, i, &t);
                for (uint64_t b = 0; b < t.bytes; b++)
                    bad += mem[i][b] != expected(t.name, b, step);
            }
        }
    }
    rc = bad == 0 ? 0 : 3;
out:
    wex_job_close(job);
    free(mem);
    return rc;
}

static void check_refusals(const char *job_text)
{
    wex_job_options small = {8, 0, "127.0.0.1:1", TOKEN, NULL};
    wex_job_options whole = {sizeof(whole), 0, "127.0.0.1:1", TOKEN, NULL};
    wex_job *job = NULL;

    EXPECT(wex_job_open("/nonexistent/job.json", WEX_SIDE_SOURCE, 0, NULL,
                        &job) == WEX_ERR_INVALID,
           "a missing job file is refused");
    EXPECT(strstr(wex_last_error(), "/nonexistent/job.json") != NULL,
           "the error names the file: %s", wex_last_error());
    EXPECT(strchr(wex_last_error(), '\n') == NULL, "one line");
    EXPECT(wex_job_open(job_text, 7, 0, NULL, &job) == WEX_ERR_INVALID,
           "side 7 is refused");
    EXPECT(wex_job_open(job_text, WEX_SIDE_SOURCE, 0, &small, &job) ==
               WEX_ERR_ABI,
           "options smaller than ABI 1.0's are refused");
    EXPECT(strstr(wex_last_error(), "struct_size 8") != NULL, "%s",
           wex_last_error());
    EXPECT(wex_job_open(job_text, WEX_SIDE_DESTINATION, 2, &whole, &job) ==
               WEX_ERR_INVALID,
           "destination rank 2 of 2 is refused");
    EXPECT(strstr(wex_last_error(), "ranks 0..1") != NULL, "%s",
           wex_last_error());
    EXPECT(job == NULL, "no job on failure");
    /* joining and leaving: a destination's, refused before any rendezvous
     * is met (the one named here listens nowhere) */
    if (wex_job_open(job_text, WEX_SIDE_SOURCE, 0, &whole, &job) == WEX_OK) {
        wex_sync_report old;
        uint64_t step = 99;

        memset(&old, 0, sizeof(old));
        old.struct_size = 8;
        EXPECT(wex_job_join(job, NULL, NULL) == WEX_ERR_INVALID &&
                   strstr(wex_last_error(), "step_p") != NULL,
               "join without step_p: %s", wex_last_error());
        EXPECT(wex_job_join(job, &step, &old) == WEX_ERR_ABI &&
                   strstr(wex_last_error(), "struct_size 8") != NULL,
               "join with a report older than ABI 1.0: %s", wex_last_error());
        EXPECT(wex_job_join(job, &step, NULL) == WEX_ERR_INVALID &&
                   strstr(wex_last_error(), "only a destination joins") &&
                   step == 0,
               "a source cannot join: %s", wex_last_error());
        EXPECT(wex_job_leave(job) == WEX_ERR_INVALID &&
                   strstr(wex_last_error(), "only a destination replica"),
               "a source cannot leave: %s", wex_last_error());
        wex_job_close(job);
        job = NULL;
    } else {
        EXPECT(0, "opening source rank 0: %s", wex_last_error());
    }
}

/* Forks the three ranks first, then hands them the rendezvous address
 * (so the store's threads, when it runs in this process, start after
 * the forks). `serve` is "cli" (`wex store`) or "api" (wex_store_open). */
static void sync_three_ranks(const char *job_text, const char *wex,
                             const char *serve)
{
    pid_t ranks[3], store = -1;
    wex_store *in_process = NULL;
    char address[300] = "";
    int pipes[3][2], status;

    for (int i = 0; i < 3; i++) {
        if (pipe(pipes[i]) != 0)
            return;
        ranks[i] = fork();
        if (ranks[i] == 0) {
            char got[300] = "";
            ssize_t n = read(pipes[i][0], got, sizeof(got) - 1);
            if (n <= 0)
                _exit(4);
            got[n] = '\0';
            _exit(rank_main(job_text,
                            i == 0 ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION,
                            i == 0 ? 0 : (uint64_t)(i - 1), got));
        }
        close(pipes[i][0]);
    }
    if (strcmp(serve, "cli") == 0) {
        store = start_store(wex, TOKEN, address, sizeof(address));
        EXPECT(store > 0, "wex store started");
    } else {
        EXPECT(wex_store_open("127.0.0.1:0", TOKEN, &in_process) == WEX_OK,
               "wex_store_open: %s", wex_last_error());
        if (in_process != NULL)
            snprintf(address, sizeof(address), "%s",
                     wex_store_address(in_process));
        EXPECT(strncmp(address, "127.0.0.1:", 10) == 0 &&
                   strcmp(address, "127.0.0.1:0") != 0,
               "the store says where it listens: '%s'", address);
    }
    for (int i = 0; i < 3; i++) {
        if (write(pipes[i][1], address, strlen(address)) < 0)
            failures++;
        close(pipes[i][1]);
    }
    for (int i = 0; i < 3; i++) {
        waitpid(ranks[i], &status, 0);
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "%s store: rank process %d synced %d steps and every byte "
               "matched (status 0x%x)",
               serve, i, STEPS, status);
    }
    if (store > 0) {
        kill(store, SIGTERM);
        waitpid(store, NULL, 0);
    }
    wex_store_close(in_process);
}

/* wex_layout_json and wex_plan_json: the documents of `wex layout --json`
 * and `wex plan --json`, and their refusals. */
static void check_documents(const char *model_path, const char *job_text)
{
    char *json = NULL;

    EXPECT(wex_layout_json(model_path, "hf", "{\"dp\": 2}", NULL, -1, &json) ==
               WEX_OK,
           "wex_layout_json: %s", wex_last_error());
    EXPECT(json != NULL && strstr(json, "\"ranks\":2") != NULL &&
               strstr(json, "\"name\":\"model.embed_tokens.weight\"") != NULL,
           "the layout document has both ranks and the checkpoint's names");
    wex_free(json);
    json = NULL;
    EXPECT(wex_layout_json(model_path, "hf", "{\"dp\": 2}", NULL, 2, &json) ==
                   WEX_ERR_INVALID &&
               json == NULL,
           "rank 2 of 2 is refused");
    EXPECT(strstr(wex_last_error(), "ranks 0..1") != NULL, "%s",
           wex_last_error());
    EXPECT(wex_layout_json(model_path, "hf", "[1]", NULL, -1, &json) ==
               WEX_ERR_INVALID,
           "a parallel config that is no object is refused");
    EXPECT(wex_layout_json(model_path, "hf", "{\"tp\": 0}", NULL, -1, &json) ==
               WEX_ERR_INVALID,
           "tp 0 is refused by the job schema");
    EXPECT(strstr(wex_last_error(), "/tp") != NULL, "%s", wex_last_error());
    EXPECT(wex_plan_json(job_text, WEX_SIDE_DESTINATION, -1, &json) == WEX_OK,
           "wex_plan_json: %s", wex_last_error());
    EXPECT(json != NULL && strstr(json, "\"redundant_bytes\":0") != NULL &&
               strstr(json, "\"destination_ranks\":2") != NULL,
           "the plan document: %s", json ? json : "(none)");
    wex_free(json);
    json = NULL;
    EXPECT(wex_plan_json(job_text, WEX_SIDE_SOURCE, 0, &json) == WEX_OK &&
               strstr(json, "\"side\":\"source\"") != NULL,
           "one rank's plan: %s", json ? json : wex_last_error());
    wex_free(json);
    EXPECT(wex_store_open(NULL, "", &(wex_store *){NULL}) == WEX_ERR_INVALID,
           "a store without a token is refused");
    EXPECT(strlen(wex_version()) >= 5, "wex_version: %s", wex_version());
}

int main(int argc, char **argv)
{
    char model_path[] = "/tmp/wex-public-api-XXXXXX";
    char job_text[1024];
    int fd;

    if (argc != 2) {
        fprintf(stderr, "usage: %s WEX_COMMAND\n", argv[0]);
        return 2;
    }
    fd = mkstemp(model_path);
    if (fd < 0 || write(fd, model_json, sizeof(model_json) - 1) !=
                      (ssize_t)(sizeof(model_json) - 1))
        return 2;
    close(fd);
    snprintf(
        job_text, sizeof(job_text),
        "{\"model\": \"%s\", \"source\": {\"engine\": \"hf\"},"
        " \"destination\": {\"engine\": \"hf\", \"parallel\": {\"dp\": 2}},"
        " \"transport\": \"shm\", \"verify\": \"digest\"}",
        model_path);
    check_refusals(job_text);
    check_documents(model_path, job_text);
    sync_three_ranks(job_text, argv[1], "cli");
    sync_three_ranks(job_text, argv[1], "api");
    unlink(model_path);
    if (failures == 0)
        printf("public API: 3 processes synced %d steps through libwex.so, "
               "at `wex store` and at wex_store_open; documents and bad "
               "calls checked\n",
               STEPS);
    return failures ? 1 : 0;
}
