/*
 * The end-to-end benchmark's baseline: a plain librabbitmq consume -> publish (with confirms) -> ack loop with the
 * worker's broker settings and none of its work (no JSON, no store). See ../JOURNAL.md, "End-to-end benchmark".
 *
 *   cc -O2 -o consume_publish_ack consume_publish_ack.c $(pkg-config --cflags --libs librabbitmq)
 *   consume_publish_ack [--host H] [--port P] [--queue Q] [--exchange X] [--routing-key K] [--prefetch N]
 *                       [--body-bytes B] [--results-per-delivery R] [--idle-exit S] [--count N]
 *                       [--overlap] [--store-work-us US] [--store-file PATH --store-bytes B]
 *
 * What it does, per batch:
 *   1. takes deliveries as they come on the consume connection: waits for the first one, then takes every one
 *      already received (non-blocking) up to the prefetch (200 by default, basic.qos), manual ack;
 *   2. publishes one result per delivery on the publish connection (publisher confirms): persistent, mandatory,
 *      content type application/json, message_id/correlation_id/headers (traceparent) copied from the delivery,
 *      a body of --body-bytes (the mean size of the worker's results for the mix) to --exchange with --routing-key;
 *      with --results-per-delivery R (default 1, at most 8), R results per delivery on average, spread evenly
 *      (1.3: every third or fourth delivery publishes two), so that the broker does the worker's amount of work;
 *   3. reads the publish connection until every sequence number of the batch is confirmed (basic.ack, multiple
 *      or not); a basic.nack or a basic.return (followed by its content) is counted as a failure;
 *   4. acknowledges the batch with one basic.ack multiple=true (if anything failed, it nacks those deliveries
 *      with requeue instead: a competent loop does not ack what was not taken).
 * It exits when nothing was delivered for --idle-exit seconds (default 2) or after --count deliveries.
 *
 * The floor contender (issue 14: what throughput a client that does the SQLite store's work and nothing more can
 * reach) adds, between 1 and 2, the store's share of the batch: --store-work-us of CPU per delivery (burnt), and
 * --store-bytes per delivery written to --store-file in 4 KiB writes, then one fdatasync (the commit). With
 * --overlap the next batch is taken, stored and published before the previous one's confirms are waited for and it
 * is acknowledged, as the worker's two stages do.
 *
 * Two connections (consume and publish), like the worker and as RabbitMQ's production checklist recommends: the
 * broker's flow control throttles a publishing connection, which must not hold up deliveries and acks. Both are
 * driven from one thread (librabbitmq connections are not thread-safe; the loop is sequential anyway).
 */
#if defined(__has_include)
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_tcp_socket.h>
#endif
#else
#include <amqp.h>
#include <amqp_tcp_socket.h>
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#define MAX_PREFETCH 65535

static void die_on_reply(amqp_rpc_reply_t reply, const char *context) {
    switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return;
    case AMQP_RESPONSE_NONE:
        fprintf(stderr, "consume_publish_ack: %s: missing RPC reply\n", context);
        break;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        fprintf(stderr, "consume_publish_ack: %s: %s\n", context, amqp_error_string2(reply.library_error));
        break;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = reply.reply.decoded;
            fprintf(stderr, "consume_publish_ack: %s: connection closed %u %.*s\n", context, m->reply_code,
                    (int)m->reply_text.len, (char *)m->reply_text.bytes);
        } else if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = reply.reply.decoded;
            fprintf(stderr, "consume_publish_ack: %s: channel closed %u %.*s\n", context, m->reply_code,
                    (int)m->reply_text.len, (char *)m->reply_text.bytes);
        } else {
            fprintf(stderr, "consume_publish_ack: %s: server exception 0x%08X\n", context, reply.reply.id);
        }
        break;
    }
    exit(1);
}

static void die_on_status(int status, const char *context) {
    if (status < 0) {
        fprintf(stderr, "consume_publish_ack: %s: %s\n", context, amqp_error_string2(status));
        exit(1);
    }
}

static amqp_connection_state_t open_connection(const char *host, int port, const char *name) {
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *socket = amqp_tcp_socket_new(conn);
    if (!socket) { fprintf(stderr, "consume_publish_ack: cannot create a socket\n"); exit(1); }
    die_on_status(amqp_socket_open(socket, host, port), "connect");
    amqp_table_entry_t entry = {.key = amqp_cstring_bytes("connection_name"),
                                .value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(name)}};
    amqp_table_t properties = {.num_entries = 1, .entries = &entry};
    /* No heartbeat: the benchmark runs for seconds and the loop only blocks with a timeout. */
    die_on_reply(amqp_login_with_properties(conn, "/", 0, 131072, 0, &properties, AMQP_SASL_METHOD_PLAIN,
                                            "guest", "guest"), "login");
    amqp_channel_open(conn, 1);
    die_on_reply(amqp_get_rpc_reply(conn), "channel.open");
    return conn;
}

static double now_seconds(void) {
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return (double)spec.tv_sec + (double)spec.tv_nsec / 1e9;
}

/* Confirm bookkeeping of one batch: sequence numbers first_seq .. first_seq + count - 1. */
struct confirms {
    uint64_t first_seq;
    size_t count;
    uint8_t *state; /* 0 pending, 1 acked, 2 nacked or returned */
    size_t *owner;  /* the batch index of the delivery each publish is a result of */
    size_t pending;
};

/* A batch of deliveries and the confirms of its results. */
struct batch {
    amqp_envelope_t *envelopes;
    size_t n;
    struct confirms confirms;
};

static void settle(struct confirms *c, uint64_t tag, int multiple, uint8_t value) {
    uint64_t from = multiple ? c->first_seq : tag;
    for (uint64_t seq = from; seq <= tag; seq++) {
        if (seq < c->first_seq || seq >= c->first_seq + c->count) continue;
        size_t i = (size_t)(seq - c->first_seq);
        if (c->state[i] == 0) { c->state[i] = value; c->pending--; }
        else if (value == 2 && c->state[i] == 1) { c->state[i] = 2; } /* a return precedes its ack */
    }
}

/* A basic.return carries the returned message's publish sequence only implicitly: the broker sends the return
 * right before the basic.ack of the same message, so the next ack for a single tag marks it failed. Kept across
 * calls: with --overlap the ack may arrive while the loop waits for the other batch. */
static int returned_pending = 0;

/* Reads the publish connection until every publish of `c` is settled; confirms of `other` (the batch published
 * after it, with --overlap) that arrive meanwhile are settled too. */
static void wait_confirms(amqp_connection_state_t conn, struct confirms *c, struct confirms *other, size_t *returned_total) {
    struct timeval timeout = {.tv_sec = 30, .tv_usec = 0};
    while (c->pending > 0) {
        amqp_frame_t frame;
        int status = amqp_simple_wait_frame_noblock(conn, &frame, &timeout);
        if (status == AMQP_STATUS_TIMEOUT) { fprintf(stderr, "consume_publish_ack: confirms timed out\n"); exit(1); }
        die_on_status(status, "waiting for confirms");
        if (frame.frame_type != AMQP_FRAME_METHOD) continue;
        switch (frame.payload.method.id) {
        case AMQP_BASIC_ACK_METHOD: {
            amqp_basic_ack_t *ack = frame.payload.method.decoded;
            settle(c, ack->delivery_tag, ack->multiple, returned_pending ? 2 : 1);
            if (other) settle(other, ack->delivery_tag, ack->multiple, returned_pending ? 2 : 1);
            returned_pending = 0;
            break;
        }
        case AMQP_BASIC_NACK_METHOD: {
            amqp_basic_nack_t *nack = frame.payload.method.decoded;
            settle(c, nack->delivery_tag, nack->multiple, 2);
            if (other) settle(other, nack->delivery_tag, nack->multiple, 2);
            break;
        }
        case AMQP_BASIC_RETURN_METHOD: {
            amqp_message_t message;
            die_on_reply(amqp_read_message(conn, frame.channel, &message, 0), "reading a returned message");
            amqp_destroy_message(&message);
            (*returned_total)++;
            returned_pending = 1;
            break;
        }
        case AMQP_CHANNEL_CLOSE_METHOD:
        case AMQP_CONNECTION_CLOSE_METHOD:
            fprintf(stderr, "consume_publish_ack: the broker closed the publish channel\n");
            exit(1);
        default:
            break;
        }
    }
    amqp_maybe_release_buffers(conn);
}

/* The store's share of a batch, simulated (--store-work-us, --store-file, --store-bytes): the CPU of the routing
 * core and the store per delivery, burnt in a loop; the bytes the store writes per delivery, in 4 KiB writes (a
 * WAL frame each), over a 64 MiB region of the file; one fdatasync per batch (the commit). */
static double store_work_us = 0;
static int store_fd = -1;
static size_t store_bytes = 0;
static off_t store_offset = 0;

static double thread_cpu_seconds(void) {
    struct timespec spec;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec);
    return (double)spec.tv_sec + (double)spec.tv_nsec / 1e9;
}

static void store_batch(size_t n) {
    if (store_work_us > 0) {
        double until = thread_cpu_seconds() + store_work_us * 1e-6 * (double)n;
        while (thread_cpu_seconds() < until) {}
    }
    if (store_fd < 0) return;
    static char frame[4096];
    for (size_t left = n * store_bytes; left > 0;) {
        size_t chunk = left < sizeof frame ? left : sizeof frame;
        if (store_offset + (off_t)chunk > ((off_t)64 << 20)) store_offset = 0;
        if (pwrite(store_fd, frame, chunk, store_offset) != (ssize_t)chunk) { perror("consume_publish_ack: store write"); exit(1); }
        store_offset += (off_t)chunk;
        left -= chunk;
    }
    if (fdatasync(store_fd) != 0) { perror("consume_publish_ack: store fdatasync"); exit(1); }
}

/* Waits for every confirm of `b` (settling those of `published_after` that arrive meanwhile), then acknowledges
 * its deliveries: one basic.ack multiple=true, or per delivery when a publish failed (those are nacked with
 * requeue). Frees the deliveries; returns how many of them failed. */
static size_t finish_batch(amqp_connection_state_t consume, amqp_connection_state_t publish, struct batch *b,
                           struct batch *published_after, size_t *returned) {
    wait_confirms(publish, &b->confirms, published_after ? &published_after->confirms : NULL, returned);
    size_t batch_failed = 0;
    uint8_t *delivery_failed = calloc(b->n, 1);
    for (size_t j = 0; j < b->confirms.count; j++) {
        if (b->confirms.state[j] == 2 && !delivery_failed[b->confirms.owner[j]]) {
            delivery_failed[b->confirms.owner[j]] = 1;
            batch_failed++;
        }
    }
    if (batch_failed == 0) {
        die_on_status(amqp_basic_ack(consume, 1, b->envelopes[b->n - 1].delivery_tag, 1), "ack");
    } else {
        for (size_t i = 0; i < b->n; i++) {
            if (delivery_failed[i]) die_on_status(amqp_basic_nack(consume, 1, b->envelopes[i].delivery_tag, 0, 1), "nack");
            else die_on_status(amqp_basic_ack(consume, 1, b->envelopes[i].delivery_tag, 0), "ack");
        }
    }
    free(delivery_failed);
    for (size_t i = 0; i < b->n; i++) amqp_destroy_envelope(&b->envelopes[i]);
    return batch_failed;
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *queue = "wallet.notifications.work", *exchange = "wallet.transactions";
    const char *routing_key = "transactions.records", *store_path = NULL;
    int port = 5672, prefetch = 200, body_bytes = 1024, overlap = 0;
    double idle_exit = 2.0, results_per_delivery = 1.0;
    long long target = 0;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--overlap")) { overlap = 1; i--; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "consume_publish_ack: %s needs a value\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "--host")) host = argv[i + 1];
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--queue")) queue = argv[i + 1];
        else if (!strcmp(argv[i], "--exchange")) exchange = argv[i + 1];
        else if (!strcmp(argv[i], "--routing-key")) routing_key = argv[i + 1];
        else if (!strcmp(argv[i], "--prefetch")) prefetch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--body-bytes")) body_bytes = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--results-per-delivery")) results_per_delivery = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--idle-exit")) idle_exit = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--count")) target = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--store-work-us")) store_work_us = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--store-file")) store_path = argv[i + 1];
        else if (!strcmp(argv[i], "--store-bytes")) store_bytes = (size_t)atol(argv[i + 1]);
        else { fprintf(stderr, "consume_publish_ack: unknown option %s\n", argv[i]); return 2; }
    }
    if (prefetch < 1 || prefetch > MAX_PREFETCH || body_bytes < 2) { fprintf(stderr, "bad --prefetch or --body-bytes\n"); return 2; }
    if (!(results_per_delivery >= 1.0 && results_per_delivery <= 8.0)) { fprintf(stderr, "bad --results-per-delivery\n"); return 2; }
    if (store_work_us < 0 || (store_bytes > 0) != (store_path != NULL)) { fprintf(stderr, "bad --store-work-us, or --store-file without --store-bytes\n"); return 2; }
    if (store_path) {
        store_fd = open(store_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (store_fd < 0) { perror("consume_publish_ack: --store-file"); return 1; }
    }
    const size_t max_results = (size_t)prefetch * 8;

    /* A JSON-looking body of the requested size, built once. */
    char *body = malloc((size_t)body_bytes);
    memset(body, 'x', (size_t)body_bytes);
    const char *head = "{\"kind\":\"transactionRecords\",\"pad\":\"";
    size_t head_len = strlen(head) < (size_t)body_bytes - 2 ? strlen(head) : 0;
    memcpy(body, head, head_len);
    body[body_bytes - 2] = '"';
    body[body_bytes - 1] = '}';
    amqp_bytes_t body_view = {.len = (size_t)body_bytes, .bytes = body};

    amqp_connection_state_t consume = open_connection(host, port, "consume_publish_ack consume");
    amqp_connection_state_t publish = open_connection(host, port, "consume_publish_ack publish");

    amqp_confirm_select(publish, 1);
    die_on_reply(amqp_get_rpc_reply(publish), "confirm.select");
    amqp_basic_qos(consume, 1, 0, (uint16_t)prefetch, 0);
    die_on_reply(amqp_get_rpc_reply(consume), "basic.qos");
    amqp_basic_consume(consume, 1, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, /*no_ack*/ 0, 0, amqp_empty_table);
    die_on_reply(amqp_get_rpc_reply(consume), "basic.consume");

    /* Two batches: with --overlap, the next one is taken, stored and published while the previous one's confirms
     * are on their way (as the worker's two stages do); without it, one batch at a time. */
    struct batch batches[2];
    for (int b = 0; b < 2; b++) {
        batches[b].envelopes = calloc((size_t)prefetch, sizeof(amqp_envelope_t));
        batches[b].n = 0;
        batches[b].confirms = (struct confirms){.first_seq = 1, .count = 0, .state = calloc(max_results, 1),
                                                .owner = calloc(max_results, sizeof(size_t)), .pending = 0};
    }
    struct batch *in_flight = NULL; /* with --overlap: published, its confirms not yet waited for */
    double result_credit = 0; /* fractional results carried over to the next delivery */
    uint64_t next_seq = 1;
    long long taken = 0, delivered = 0, batches_done = 0;
    size_t returned = 0, failed = 0;
    double first_delivery = 0, last_ack = 0;

    for (;;) {
        struct batch *current = in_flight == &batches[0] ? &batches[1] : &batches[0];
        /* 1. The first delivery of a batch: wait up to the idle limit (not at all while a batch is in flight:
         * its deliveries may be the whole prefetch, and its ack is what lets the broker send more). */
        struct timeval idle = {.tv_sec = (long)idle_exit, .tv_usec = (long)((idle_exit - (long)idle_exit) * 1e6)};
        struct timeval zero = {0, 0};
        size_t n = 0;
        amqp_rpc_reply_t reply;
        if (target == 0 || taken < target) {
            amqp_maybe_release_buffers(consume);
            reply = amqp_consume_message(consume, &current->envelopes[0], in_flight ? &zero : &idle, 0);
            if (reply.reply_type == AMQP_RESPONSE_NORMAL) n = 1;
            else if (reply.reply_type != AMQP_RESPONSE_LIBRARY_EXCEPTION || reply.library_error != AMQP_STATUS_TIMEOUT)
                die_on_reply(reply, "consume");
        }
        if (n == 0 && !in_flight) break;
        /* Then every delivery already received, without blocking, up to the prefetch. */
        while (n > 0 && n < (size_t)prefetch && (target == 0 || taken + (long long)n < target)) {
            reply = amqp_consume_message(consume, &current->envelopes[n], &zero, 0);
            if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT) break;
            die_on_reply(reply, "consume");
            n++;
        }
        current->n = n;
        if (n > 0 && taken == 0) first_delivery = now_seconds();
        taken += (long long)n;

        if (n > 0) {
            /* 2. The store's share (nothing unless --store-work-us or --store-file). */
            store_batch(n);

            /* 3. One result per delivery (or --results-per-delivery), with the delivery's identifiers. */
            struct confirms *confirms = &current->confirms;
            confirms->first_seq = next_seq;
            size_t published = 0;
            for (size_t i = 0; i < n; i++) {
                amqp_basic_properties_t *in = &current->envelopes[i].message.properties;
                amqp_basic_properties_t props;
                memset(&props, 0, sizeof props);
                props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_TYPE_FLAG;
                props.content_type = amqp_cstring_bytes("application/json");
                props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
                props.type = amqp_cstring_bytes("transactionRecords");
                if (in->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) { props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG; props.message_id = in->message_id; }
                if (in->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) { props._flags |= AMQP_BASIC_CORRELATION_ID_FLAG; props.correlation_id = in->correlation_id; }
                if (in->_flags & AMQP_BASIC_HEADERS_FLAG) { props._flags |= AMQP_BASIC_HEADERS_FLAG; props.headers = in->headers; }
                result_credit += results_per_delivery;
                size_t results = (size_t)result_credit;
                result_credit -= (double)results;
                for (size_t r = 0; r < results; r++) {
                    die_on_status(amqp_basic_publish(publish, 1, amqp_cstring_bytes(exchange), amqp_cstring_bytes(routing_key),
                                                     /*mandatory*/ 1, 0, &props, body_view), "publish");
                    confirms->state[published] = 0;
                    confirms->owner[published++] = i;
                }
            }
            confirms->count = published;
            confirms->pending = published;
            next_seq += published;
        }

        /* 4. Every confirm of this batch, then its ack; with --overlap, of the batch before it instead. */
        struct batch *finishing = current, *published_after = NULL;
        if (overlap) {
            finishing = in_flight;
            published_after = n > 0 ? current : NULL;
            in_flight = published_after;
        }
        if (!finishing) continue;
        failed += finish_batch(consume, publish, finishing, published_after, &returned);
        delivered += (long long)finishing->n;
        batches_done++;
        last_ack = now_seconds();
        if (target > 0 && delivered >= target) break;
    }

    double span = last_ack - first_delivery;
    fprintf(stderr, "consume_publish_ack: %lld deliveries in %lld batches (mean %.1f), %zu returned, %zu not confirmed; "
                    "%.0f/s from the first delivery to the last ack\n",
            delivered, batches_done, batches_done ? (double)delivered / (double)batches_done : 0.0, returned, failed,
            span > 0 ? (double)delivered / span : 0.0);
    amqp_channel_close(consume, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(consume, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(consume);
    amqp_channel_close(publish, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(publish, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(publish);
    for (int b = 0; b < 2; b++) {
        free(batches[b].envelopes);
        free(batches[b].confirms.state);
        free(batches[b].confirms.owner);
    }
    if (store_fd >= 0) close(store_fd);
    free(body);
    return 0;
}
