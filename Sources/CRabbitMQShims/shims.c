#include "CRabbitMQShims.h"

#include <string.h>

// MARK: - Login

amqp_rpc_reply_t CRabbitMQShims_login(amqp_connection_state_t state,
                                      const char *vhost,
                                      int channel_max,
                                      int frame_max,
                                      int heartbeat_seconds,
                                      const char *user,
                                      const char *password,
                                      const char *connection_name,
                                      const char *product_version) {
    amqp_table_entry_t capabilities[5];
    const char *capability_names[5] = {
        "consumer_cancel_notify",       // basic.cancel when the queue is deleted under a consumer
        "connection.blocked",           // connection.blocked / unblocked on a resource alarm
        "publisher_confirms",           // confirm.select
        "basic.nack",                   // negative publisher confirms
        "authentication_failure_close", // connection.close 403 instead of a dropped socket on bad credentials
    };
    for (int i = 0; i < 5; i++) {
        capabilities[i].key = amqp_cstring_bytes(capability_names[i]);
        capabilities[i].value.kind = AMQP_FIELD_KIND_BOOLEAN;
        capabilities[i].value.value.boolean = 1;
    }

    amqp_table_entry_t properties[4];
    int count = 0;
    properties[count].key = amqp_cstring_bytes("capabilities");
    properties[count].value.kind = AMQP_FIELD_KIND_TABLE;
    properties[count].value.value.table.num_entries = 5;
    properties[count].value.value.table.entries = capabilities;
    count++;
    properties[count].key = amqp_cstring_bytes("product");
    properties[count].value.kind = AMQP_FIELD_KIND_UTF8;
    properties[count].value.value.bytes = amqp_cstring_bytes("wallet-notification-worker");
    count++;
    if (product_version != NULL) {
        properties[count].key = amqp_cstring_bytes("version");
        properties[count].value.kind = AMQP_FIELD_KIND_UTF8;
        properties[count].value.value.bytes = amqp_cstring_bytes(product_version);
        count++;
    }
    if (connection_name != NULL && connection_name[0] != '\0') {
        properties[count].key = amqp_cstring_bytes("connection_name");
        properties[count].value.kind = AMQP_FIELD_KIND_UTF8;
        properties[count].value.value.bytes = amqp_cstring_bytes(connection_name);
        count++;
    }
    amqp_table_t table = {.num_entries = count, .entries = properties};

    return amqp_login_with_properties(state, vhost, channel_max, frame_max, heartbeat_seconds, &table,
                                      AMQP_SASL_METHOD_PLAIN, user, password);
}

// MARK: - Publish frames

static void put_u16(uint8_t *at, uint16_t value) {
    at[0] = (uint8_t)(value >> 8);
    at[1] = (uint8_t)value;
}

static void put_u32(uint8_t *at, uint32_t value) {
    put_u16(at, (uint16_t)(value >> 16));
    put_u16(at + 2, (uint16_t)value);
}

static void put_u64(uint8_t *at, uint64_t value) {
    put_u32(at, (uint32_t)(value >> 32));
    put_u32(at + 4, (uint32_t)value);
}

// A frame: type (1 byte), channel (2), payload size (4), payload, AMQP_FRAME_END.
enum { FRAME_HEADER_SIZE = 7, FRAME_FOOTER_SIZE = 1 };

// Writes the envelope around a payload already in place at frame + FRAME_HEADER_SIZE; returns the frame's size.
static size_t close_frame(uint8_t *frame, uint8_t type, amqp_channel_t channel, uint32_t payload_size) {
    frame[0] = type;
    put_u16(frame + 1, channel);
    put_u32(frame + 3, payload_size);
    frame[FRAME_HEADER_SIZE + payload_size] = AMQP_FRAME_END;
    return FRAME_HEADER_SIZE + payload_size + FRAME_FOOTER_SIZE;
}

int CRabbitMQShims_encode_publish_head(amqp_channel_t channel,
                                       amqp_bytes_t exchange,
                                       amqp_bytes_t routing_key,
                                       amqp_boolean_t mandatory,
                                       amqp_basic_properties_t *properties,
                                       uint64_t body_size,
                                       size_t frame_max,
                                       amqp_bytes_t out) {
    uint8_t *start = out.bytes;
    size_t frame_limit = frame_max < out.len ? frame_max : out.len;
    // Method frame: the method number, then the arguments.
    if (frame_limit < FRAME_HEADER_SIZE + 4 + FRAME_FOOTER_SIZE) return AMQP_STATUS_INVALID_PARAMETER;
    amqp_basic_publish_t method;
    memset(&method, 0, sizeof method);
    method.exchange = exchange;
    method.routing_key = routing_key;
    method.mandatory = mandatory;
    amqp_bytes_t arguments = {.len = frame_limit - FRAME_HEADER_SIZE - 4 - FRAME_FOOTER_SIZE,
                              .bytes = start + FRAME_HEADER_SIZE + 4};
    int arguments_size = amqp_encode_method(AMQP_BASIC_PUBLISH_METHOD, &method, arguments);
    if (arguments_size < 0) return arguments_size;
    put_u32(start + FRAME_HEADER_SIZE, AMQP_BASIC_PUBLISH_METHOD);
    size_t offset = close_frame(start, AMQP_FRAME_METHOD, channel, 4 + (uint32_t)arguments_size);

    // Content header frame: class, weight (0), body size, then the property flags and values.
    uint8_t *header = start + offset;
    size_t room = out.len - offset;
    size_t header_limit = frame_max < room ? frame_max : room;
    if (header_limit < FRAME_HEADER_SIZE + 12 + FRAME_FOOTER_SIZE) return AMQP_STATUS_INVALID_PARAMETER;
    amqp_bytes_t encoded_properties = {.len = header_limit - FRAME_HEADER_SIZE - 12 - FRAME_FOOTER_SIZE,
                                       .bytes = header + FRAME_HEADER_SIZE + 12};
    int properties_size = amqp_encode_properties(AMQP_BASIC_CLASS, properties, encoded_properties);
    if (properties_size < 0) return properties_size;
    put_u16(header + FRAME_HEADER_SIZE, AMQP_BASIC_CLASS);
    put_u16(header + FRAME_HEADER_SIZE + 2, 0);
    put_u64(header + FRAME_HEADER_SIZE + 4, body_size);
    return (int)(offset + close_frame(header, AMQP_FRAME_HEADER, channel, 12 + (uint32_t)properties_size));
}

// MARK: - Method numbers

const amqp_method_number_t CRabbitMQShims_BASIC_DELIVER_METHOD = AMQP_BASIC_DELIVER_METHOD;
const amqp_method_number_t CRabbitMQShims_BASIC_RETURN_METHOD = AMQP_BASIC_RETURN_METHOD;
const amqp_method_number_t CRabbitMQShims_BASIC_ACK_METHOD = AMQP_BASIC_ACK_METHOD;
const amqp_method_number_t CRabbitMQShims_BASIC_NACK_METHOD = AMQP_BASIC_NACK_METHOD;
const amqp_method_number_t CRabbitMQShims_BASIC_CANCEL_METHOD = AMQP_BASIC_CANCEL_METHOD;
const amqp_method_number_t CRabbitMQShims_CHANNEL_CLOSE_METHOD = AMQP_CHANNEL_CLOSE_METHOD;
const amqp_method_number_t CRabbitMQShims_CHANNEL_CLOSE_OK_METHOD = AMQP_CHANNEL_CLOSE_OK_METHOD;
const amqp_method_number_t CRabbitMQShims_CONNECTION_CLOSE_METHOD = AMQP_CONNECTION_CLOSE_METHOD;
const amqp_method_number_t CRabbitMQShims_CONNECTION_CLOSE_OK_METHOD = AMQP_CONNECTION_CLOSE_OK_METHOD;
const amqp_method_number_t CRabbitMQShims_CONNECTION_BLOCKED_METHOD = AMQP_CONNECTION_BLOCKED_METHOD;
const amqp_method_number_t CRabbitMQShims_CONNECTION_UNBLOCKED_METHOD = AMQP_CONNECTION_UNBLOCKED_METHOD;

// MARK: - Basic property flags

const amqp_flags_t CRabbitMQShims_CONTENT_TYPE_FLAG = AMQP_BASIC_CONTENT_TYPE_FLAG;
const amqp_flags_t CRabbitMQShims_CONTENT_ENCODING_FLAG = AMQP_BASIC_CONTENT_ENCODING_FLAG;
const amqp_flags_t CRabbitMQShims_HEADERS_FLAG = AMQP_BASIC_HEADERS_FLAG;
const amqp_flags_t CRabbitMQShims_DELIVERY_MODE_FLAG = AMQP_BASIC_DELIVERY_MODE_FLAG;
const amqp_flags_t CRabbitMQShims_PRIORITY_FLAG = AMQP_BASIC_PRIORITY_FLAG;
const amqp_flags_t CRabbitMQShims_CORRELATION_ID_FLAG = AMQP_BASIC_CORRELATION_ID_FLAG;
const amqp_flags_t CRabbitMQShims_REPLY_TO_FLAG = AMQP_BASIC_REPLY_TO_FLAG;
const amqp_flags_t CRabbitMQShims_EXPIRATION_FLAG = AMQP_BASIC_EXPIRATION_FLAG;
const amqp_flags_t CRabbitMQShims_MESSAGE_ID_FLAG = AMQP_BASIC_MESSAGE_ID_FLAG;
const amqp_flags_t CRabbitMQShims_TIMESTAMP_FLAG = AMQP_BASIC_TIMESTAMP_FLAG;
const amqp_flags_t CRabbitMQShims_TYPE_FLAG = AMQP_BASIC_TYPE_FLAG;
const amqp_flags_t CRabbitMQShims_USER_ID_FLAG = AMQP_BASIC_USER_ID_FLAG;
const amqp_flags_t CRabbitMQShims_APP_ID_FLAG = AMQP_BASIC_APP_ID_FLAG;
const amqp_flags_t CRabbitMQShims_CLUSTER_ID_FLAG = AMQP_BASIC_CLUSTER_ID_FLAG;
