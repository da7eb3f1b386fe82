#include "../../CRabbitMQ/shim.h"
