#ifndef WALLET_CRABBITMQSHIMS_H
#define WALLET_CRABBITMQSHIMS_H

// The one place that includes librabbitmq (either header layout): see CRabbitMQ/shim.h.
#include "../../CRabbitMQ/shim.h"

// MARK: - Login
//
// amqp_login and amqp_login_with_properties are variadic (the SASL arguments follow `...`), and Swift cannot
// call C variadic functions. This wrapper also builds the client-properties table: without the
// `capabilities` advertised here the broker never sends basic.cancel (queue deleted), connection.blocked,
// basic.nack, or a clear connection.close on a failed login.

/// Logs in with SASL PLAIN, advertising the capabilities the transport relies on and naming the connection
/// (`connection_name` is shown in the management UI). `connection_name` may be NULL.
amqp_rpc_reply_t CRabbitMQShims_login(amqp_connection_state_t state,
                                      const char *vhost,
                                      int channel_max,
                                      int frame_max,
                                      int heartbeat_seconds,
                                      const char *user,
                                      const char *password,
                                      const char *connection_name,
                                      const char *product_version);

// MARK: - Publish frames
//
// amqp_basic_publish writes each frame (method, content header, body) with a send() of its own. The transport
// encodes a whole batch of publishes into one buffer instead and writes it at once (plain TCP only).

/// The largest method frame of a basic.publish (two short strings of at most 255 bytes) plus its end byte.
#define CRABBITMQSHIMS_PUBLISH_METHOD_FRAME_MAX 527

/// Encodes the basic.publish method frame and the content header frame of one message for `channel` into `out`,
/// exactly as amqp_basic_publish sends them; the caller appends the body frames. `out` should hold
/// CRABBITMQSHIMS_PUBLISH_METHOD_FRAME_MAX + frame_max bytes (a content header never exceeds a frame).
/// Returns the number of bytes written, or a negative amqp_status_enum (e.g. properties too large for a frame).
int CRabbitMQShims_encode_publish_head(amqp_channel_t channel,
                                       amqp_bytes_t exchange,
                                       amqp_bytes_t routing_key,
                                       amqp_boolean_t mandatory,
                                       amqp_basic_properties_t *properties,
                                       uint64_t body_size,
                                       size_t frame_max,
                                       amqp_bytes_t out);

// MARK: - Method numbers
//
// librabbitmq defines method numbers as casting macros (`((amqp_method_number_t)0x003C003C)`), which
// Swift does not import. These constants carry the same values.

extern const amqp_method_number_t CRabbitMQShims_BASIC_DELIVER_METHOD;
extern const amqp_method_number_t CRabbitMQShims_BASIC_RETURN_METHOD;
extern const amqp_method_number_t CRabbitMQShims_BASIC_ACK_METHOD;
extern const amqp_method_number_t CRabbitMQShims_BASIC_NACK_METHOD;
extern const amqp_method_number_t CRabbitMQShims_BASIC_CANCEL_METHOD;
extern const amqp_method_number_t CRabbitMQShims_CHANNEL_CLOSE_METHOD;
extern const amqp_method_number_t CRabbitMQShims_CHANNEL_CLOSE_OK_METHOD;
extern const amqp_method_number_t CRabbitMQShims_CONNECTION_CLOSE_METHOD;
extern const amqp_method_number_t CRabbitMQShims_CONNECTION_CLOSE_OK_METHOD;
extern const amqp_method_number_t CRabbitMQShims_CONNECTION_BLOCKED_METHOD;
extern const amqp_method_number_t CRabbitMQShims_CONNECTION_UNBLOCKED_METHOD;

// MARK: - Basic property flags
//
// `AMQP_BASIC_*_FLAG` are `(1 << n)` macros; exported as typed constants so Swift code reads the same
// names whatever the importer makes of the macros.

extern const amqp_flags_t CRabbitMQShims_CONTENT_TYPE_FLAG;
extern const amqp_flags_t CRabbitMQShims_CONTENT_ENCODING_FLAG;
extern const amqp_flags_t CRabbitMQShims_HEADERS_FLAG;
extern const amqp_flags_t CRabbitMQShims_DELIVERY_MODE_FLAG;
extern const amqp_flags_t CRabbitMQShims_PRIORITY_FLAG;
extern const amqp_flags_t CRabbitMQShims_CORRELATION_ID_FLAG;
extern const amqp_flags_t CRabbitMQShims_REPLY_TO_FLAG;
extern const amqp_flags_t CRabbitMQShims_EXPIRATION_FLAG;
extern const amqp_flags_t CRabbitMQShims_MESSAGE_ID_FLAG;
extern const amqp_flags_t CRabbitMQShims_TIMESTAMP_FLAG;
extern const amqp_flags_t CRabbitMQShims_TYPE_FLAG;
extern const amqp_flags_t CRabbitMQShims_USER_ID_FLAG;
extern const amqp_flags_t CRabbitMQShims_APP_ID_FLAG;
extern const amqp_flags_t CRabbitMQShims_CLUSTER_ID_FLAG;

#endif
