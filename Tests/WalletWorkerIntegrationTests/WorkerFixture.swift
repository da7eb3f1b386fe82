// Shared helpers of the worker's integration tests (filled in by the test suites).
