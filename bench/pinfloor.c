/* The pinned-download floor for `make bench` (B8): the least a download does that keeps B6's
 * rule, with Labstream's shape and none of its bookkeeping.
 *
 *   pinfloor URL SIZE FILE [BODIES [CHECKPOINT_MIB]]
 *
 * Two bodies on the wire (a head and a look-ahead), each taking the next 16 MiB segment as a
 * ranged GET on a kept-alive libcurl handle with a 512 KiB buffer, writing at its offset in FILE
 * (made SIZE bytes long, sparse) and starting writeback every 512 KiB. Every 2 MiB is a
 * checkpoint that a syncer thread makes durable with fdatasync; a body hands one over only once
 * the one before it is synced, so a kill loses at most the checkpoint being synced and the one
 * being filled. A segment is done when its last checkpoint is synced. No digest, no index, no
 * FUSE.
 * A measuring tool, not part of Labstream.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { max_bodies = 16, segment = 16 << 20, writeback_unit = 512 << 10 };
static int bodies = 2;
static long long checkpoint = 2 << 20;

static const char *url;
static long long size;
static int fd;
static atomic_llong next_segment;
static atomic_int failed;

struct body {
    pthread_t receiver, syncer;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int queued, syncing, done;     /* checkpoints waiting for the syncer; one being synced */
    long long offset, unsynced, unflushed;
};

static void *syncer(void *arg)
{
    struct body *b = arg;
    pthread_mutex_lock(&b->lock);
    for (;;) {
        while (!b->queued && !b->done) pthread_cond_wait(&b->changed, &b->lock);
        if (!b->queued) break;
        b->queued--; b->syncing = 1;
        pthread_mutex_unlock(&b->lock);
        if (fdatasync(fd) != 0) { perror("fdatasync"); atomic_store(&failed, 1); }
        pthread_mutex_lock(&b->lock);
        b->syncing = 0;
        pthread_cond_broadcast(&b->changed);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

/* Hands a checkpoint over, waiting first until the one before it is synced. */
static void queue_checkpoint(struct body *b)
{
    pthread_mutex_lock(&b->lock);
    while (b->queued || b->syncing) pthread_cond_wait(&b->changed, &b->lock);
    b->queued++;
    pthread_cond_broadcast(&b->changed);
    pthread_mutex_unlock(&b->lock);
}

static void wait_synced(struct body *b)
{
    pthread_mutex_lock(&b->lock);
    while (b->queued || b->syncing) pthread_cond_wait(&b->changed, &b->lock);
    pthread_mutex_unlock(&b->lock);
}

static size_t received(char *data, size_t one, size_t n, void *arg)
{
    struct body *b = arg;
    size_t length = one * n, done = 0;
    while (done < length) {
        ssize_t w = pwrite(fd, data + done, length - done, b->offset);
        if (w <= 0) { perror("pwrite"); atomic_store(&failed, 1); return 0; }
        done += (size_t)w; b->offset += w; b->unsynced += w; b->unflushed += w;
    }
    if (b->unflushed >= writeback_unit) {
        sync_file_range(fd, b->offset - b->unflushed, b->unflushed, SYNC_FILE_RANGE_WRITE);
        b->unflushed = 0;
    }
    if (b->unsynced >= checkpoint) { queue_checkpoint(b); b->unsynced = 0; }
    return length;
}

static void *receiver(void *arg)
{
    struct body *b = arg;
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, received);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    for (;;) {
        long long start = atomic_fetch_add(&next_segment, 1) * (long long)segment;
        if (start >= size || atomic_load(&failed)) break;
        long long end = start + segment < size ? start + segment : size;
        char range[64];
        snprintf(range, sizeof range, "%lld-%lld", start, end - 1);
        curl_easy_setopt(h, CURLOPT_RANGE, range);
        b->offset = start; b->unsynced = 0; b->unflushed = 0;
        CURLcode rc = curl_easy_perform(h);
        if (rc != CURLE_OK || b->offset != end) {
            fprintf(stderr, "pinfloor: %s for bytes %s\n", curl_easy_strerror(rc), range);
            atomic_store(&failed, 1);
            break;
        }
        if (b->unflushed) sync_file_range(fd, b->offset - b->unflushed, b->unflushed, SYNC_FILE_RANGE_WRITE);
        if (b->unsynced) queue_checkpoint(b);
        wait_synced(b);
    }
    curl_easy_cleanup(h);
    pthread_mutex_lock(&b->lock);
    b->done = 1;
    pthread_cond_broadcast(&b->changed);
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 6 || (size = atoll(argv[2])) <= 0
        || (argc > 4 && ((bodies = atoi(argv[4])) < 1 || bodies > max_bodies))
        || (argc > 5 && (checkpoint = atoll(argv[5]) << 20) <= 0)) {
        fprintf(stderr, "usage: pinfloor URL SIZE FILE [BODIES (1-16, 2)] [CHECKPOINT_MIB (2)]\n");
        return 2;
    }
    url = argv[1];
    fd = open(argv[3], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, size) != 0) { perror(argv[3]); return 1; }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct body b[max_bodies] = { 0 };
    for (int i = 0; i < bodies; i++) {
        pthread_mutex_init(&b[i].lock, NULL);
        pthread_cond_init(&b[i].changed, NULL);
        pthread_create(&b[i].syncer, NULL, syncer, &b[i]);
        pthread_create(&b[i].receiver, NULL, receiver, &b[i]);
    }
    for (int i = 0; i < bodies; i++) { pthread_join(b[i].receiver, NULL); pthread_join(b[i].syncer, NULL); }
    close(fd);
    return atomic_load(&failed) ? 1 : 0;
}
