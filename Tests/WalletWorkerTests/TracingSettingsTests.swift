import Testing

@testable import WalletWorker

@Suite("Tracing settings from the OTEL_* environment")
struct TracingSettingsTests {
    @Test("off without any OpenTelemetry variable")
    func offByDefault() throws {
        #expect(try TracingSettings(environment: [:]) == .off)
        #expect(try TracingSettings(environment: ["OTEL_SERVICE_NAME": "wallet-worker"]) == .off)
    }

    @Test(
        "on with OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint and no exporter named",
        arguments: [
            ["OTEL_TRACES_EXPORTER": "otlp"],
            ["OTEL_TRACES_EXPORTER": " OTLP "],
            ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"],
            ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"],
            ["OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"],
        ])
    func on(environment: [String: String]) throws {
        let settings = try TracingSettings(environment: environment)
        #expect(settings.isEnabled)
        #expect(settings.otlpProtocol == "http/protobuf")
    }

    @Test(
        "OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none win over an endpoint",
        arguments: [
            ["OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"],
            ["OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"],
            ["OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"],
            ["OTEL_TRACES_EXPORTER": "", "OTEL_EXPORTER_OTLP_ENDPOINT": ""],
        ])
    func off(environment: [String: String]) throws {
        #expect(try TracingSettings(environment: environment) == .off)
    }

    @Test("the traces protocol wins over the general one; http/json is accepted")
    func protocols() throws {
        let json = try TracingSettings(environment: [
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
        ])
        #expect(json.otlpProtocol == "http/json")
        let specific = try TracingSettings(environment: [
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        ])
        #expect(specific.otlpProtocol == "http/protobuf")
    }

    @Test(
        "what this build cannot export is an error naming the variable",
        arguments: [
            (["OTEL_TRACES_EXPORTER": "zipkin"], "OTEL_TRACES_EXPORTER"),
            (["OTEL_TRACES_EXPORTER": "otlp,console"], "OTEL_TRACES_EXPORTER"),
            (["OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], "OTEL_EXPORTER_OTLP_PROTOCOL"),
            (
                ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"],
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
            ),
        ])
    func unsupported(environment: [String: String], variable: String) {
        #expect {
            try TracingSettings(environment: environment)
        } throws: { error in
            "\(error)".contains(variable)
        }
    }

    @Test("WALLET_TRACE_DETAIL: message by default, full on request, anything else an error naming it")
    func detail() throws {
        let on = ["OTEL_TRACES_EXPORTER": "otlp"]
        #expect(try TracingSettings(environment: on).detail == .message)
        #expect(try TracingSettings(environment: on.merging(["WALLET_TRACE_DETAIL": " Full "]) { $1 }).detail == .full)
        #expect(
            try TracingSettings(environment: on.merging(["WALLET_TRACE_DETAIL": "message"]) { $1 }).detail == .message)
        #expect {
            try TracingSettings(environment: on.merging(["WALLET_TRACE_DETAIL": "all"]) { $1 })
        } throws: { error in
            "\(error)".contains("WALLET_TRACE_DETAIL") && "\(error)".contains("message or full")
        }
    }

    @Test("a protocol nobody uses does not matter while tracing is off")
    func protocolIgnoredWhenOff() throws {
        #expect(try TracingSettings(environment: ["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"]) == .off)
    }
}

@Suite("W3C traceparent validation")
struct TraceParentTests {
    @Test(
        "valid headers",
        arguments: [
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ])
    func valid(_ header: String) {
        #expect(TraceParent.isValid(header))
    }

    @Test(
        "invalid headers",
        arguments: [
            "",
            "garbage",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",  // upper case
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span id
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // forbidden version
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // version 00 has no more fields
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ])
    func invalid(_ header: String) {
        #expect(!TraceParent.isValid(header))
    }
}
