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
