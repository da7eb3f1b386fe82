/*
 * The end-to-end benchmark's baseline: a plain librabbitmq consume -> publish (with confirms) -> ack loop with the
 * worker's broker settings and none of its work (no JSON, no store). See ../README.md, "End-to-end benchmark".
 *
 *   cc -O2 -o consume_publish_ack consume_publish_ack.c $(pkg-config --cflags --libs librabbitmq)
 *   consume_publish_ack [--host H] [--port P] [--queue Q] [--exchange X] [--routing-key K] [--prefetch N]
 *                       [--body-bytes B] [--results-per-delivery R] [--idle-exit S] [--count N]
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
 * right before the basic.ack of the same message, so the next ack for a single tag marks it failed. */
static void wait_confirms(amqp_connection_state_t conn, struct confirms *c, size_t *returned_total) {
    int returned_pending = 0;
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
            returned_pending = 0;
            break;
        }
        case AMQP_BASIC_NACK_METHOD: {
            amqp_basic_nack_t *nack = frame.payload.method.decoded;
            settle(c, nack->delivery_tag, nack->multiple, 2);
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

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *queue = "wallet.notifications.work", *exchange = "wallet.transactions";
    const char *routing_key = "transactions.records";
    int port = 5672, prefetch = 200, body_bytes = 1024;
    double idle_exit = 2.0, results_per_delivery = 1.0;
    long long target = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
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
        else { fprintf(stderr, "consume_publish_ack: unknown option %s\n", argv[i]); return 2; }
    }
    if (prefetch < 1 || prefetch > MAX_PREFETCH || body_bytes < 2) { fprintf(stderr, "bad --prefetch or --body-bytes\n"); return 2; }
    if (!(results_per_delivery >= 1.0 && results_per_delivery <= 8.0)) { fprintf(stderr, "bad --results-per-delivery\n"); return 2; }
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

    amqp_envelope_t *batch = calloc((size_t)prefetch, sizeof(amqp_envelope_t));
    struct confirms confirms = {.first_seq = 1, .count = 0, .state = calloc(max_results, 1),
                                .owner = calloc(max_results, sizeof(size_t)), .pending = 0};
    double result_credit = 0; /* fractional results carried over to the next delivery */
    uint64_t next_seq = 1;
    long long delivered = 0, batches = 0;
    size_t returned = 0, failed = 0;
    double first_delivery = 0, last_ack = 0;

    for (;;) {
        /* 1. The first delivery of a batch: wait up to the idle limit. */
        size_t n = 0;
        struct timeval idle = {.tv_sec = (long)idle_exit, .tv_usec = (long)((idle_exit - (long)idle_exit) * 1e6)};
        amqp_maybe_release_buffers(consume);
        amqp_rpc_reply_t reply = amqp_consume_message(consume, &batch[0], &idle, 0);
        if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT) break;
        die_on_reply(reply, "consume");
        n = 1;
        /* Then every delivery already received, without blocking, up to the prefetch. */
        while (n < (size_t)prefetch && (target == 0 || delivered + (long long)n < target)) {
            struct timeval zero = {0, 0};
            reply = amqp_consume_message(consume, &batch[n], &zero, 0);
            if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT) break;
            die_on_reply(reply, "consume");
            n++;
        }
        if (delivered == 0) first_delivery = now_seconds();

        /* 2. One result per delivery (or --results-per-delivery), with the delivery's identifiers. */
        confirms.first_seq = next_seq;
        size_t published = 0;
        for (size_t i = 0; i < n; i++) {
            amqp_basic_properties_t *in = &batch[i].message.properties;
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
                confirms.state[published] = 0;
                confirms.owner[published++] = i;
            }
        }
        confirms.count = published;
        confirms.pending = published;
        next_seq += published;

        /* 3. Every confirm of the batch. */
        wait_confirms(publish, &confirms, &returned);

        /* 4. One ack for the batch (or per delivery when a publish failed). */
        size_t batch_failed = 0;
        uint8_t *delivery_failed = calloc(n, 1);
        for (size_t j = 0; j < published; j++) {
            if (confirms.state[j] == 2 && !delivery_failed[confirms.owner[j]]) {
                delivery_failed[confirms.owner[j]] = 1;
                batch_failed++;
            }
        }
        if (batch_failed == 0) {
            die_on_status(amqp_basic_ack(consume, 1, batch[n - 1].delivery_tag, 1), "ack");
        } else {
            for (size_t i = 0; i < n; i++) {
                if (delivery_failed[i]) die_on_status(amqp_basic_nack(consume, 1, batch[i].delivery_tag, 0, 1), "nack");
                else die_on_status(amqp_basic_ack(consume, 1, batch[i].delivery_tag, 0), "ack");
            }
            failed += batch_failed;
        }
        free(delivery_failed);
        for (size_t i = 0; i < n; i++) amqp_destroy_envelope(&batch[i]);
        delivered += (long long)n;
        batches++;
        last_ack = now_seconds();
        if (target > 0 && delivered >= target) break;
    }

    double span = last_ack - first_delivery;
    fprintf(stderr, "consume_publish_ack: %lld deliveries in %lld batches (mean %.1f), %zu returned, %zu not confirmed; "
                    "%.0f/s from the first delivery to the last ack\n",
            delivered, batches, batches ? (double)delivered / (double)batches : 0.0, returned, failed,
            span > 0 ? (double)delivered / span : 0.0);
    amqp_channel_close(consume, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(consume, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(consume);
    amqp_channel_close(publish, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(publish, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(publish);
    free(batch);
    free(confirms.state);
    free(confirms.owner);
    free(body);
    return 0;
}
