print("amqp-demo: not written yet")
