public enum AMQPTransportPlaceholder {}
