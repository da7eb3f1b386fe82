#ifndef WALLET_CRABBITMQ_SHIM_H
#define WALLET_CRABBITMQ_SHIM_H

// librabbitmq >= 0.12 installs its headers under rabbitmq-c/; Debian 12 ships 0.11 with flat headers.
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/framing.h>
#include <rabbitmq-c/tcp_socket.h>
#include <rabbitmq-c/ssl_socket.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <amqp_ssl_socket.h>
#endif

#endif
