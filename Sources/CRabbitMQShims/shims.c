#include "CRabbitMQShims.h"
