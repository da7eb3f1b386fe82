// Replaced by the routing-core benchmark (issue 3).
print("routing benchmark: not written yet")
