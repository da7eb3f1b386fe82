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

    @Test("the exporter's settings: the specification's variables over the worker's defaults")
    func exportSettings() throws {
        let defaults = try TracingSettings(environment: ["OTEL_TRACES_EXPORTER": "otlp"]).export
        #expect(defaults == .defaults)
        #expect(defaults.endpoint == "http://localhost:4318/v1/traces")
        #expect(defaults.sampler == .parentBased(root: .alwaysOn))

        let set = try TracingSettings(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318/",
            "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc%3D, x-tenant = wallet ",
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TIMEOUT": "9000",
            "OTEL_BSP_EXPORT_TIMEOUT": "7000", "OTEL_BSP_SCHEDULE_DELAY": "250",
            "OTEL_BSP_MAX_QUEUE_SIZE": "1000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "5000",
            "OTEL_SERVICE_NAME": "wallet-eu",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,region=eu%2Dwest",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_EXPORTER_OTLP_CERTIFICATE": "/etc/otel/ca.pem",
        ]).export
        #expect(set.endpoint == "https://collector:4318/v1/traces", "the signal's path appended to the base URL")
        #expect(set.headers == [.init("authorization", "Bearer abc="), .init("x-tenant", "wallet")])
        #expect(set.requestTimeout == .milliseconds(2_500), "the traces-specific variable wins")
        #expect(set.exportTimeout == .milliseconds(7_000))
        #expect(set.scheduleDelay == .milliseconds(250))
        #expect(set.maxQueueSize == 1_000 && set.maxExportBatchSize == 1_000, "a batch is at most the queue")
        #expect(set.serviceName == "wallet-eu")
        #expect(set.resourceAttributes == [.init("deployment.environment", "prod"), .init("region", "eu-west")])
        #expect(set.sampler == .parentBased(root: .traceIDRatio(0.25)))
        #expect(set.certificate == "/etc/otel/ca.pem")

        let specific = try TracingSettings(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/custom",
        ]).export
        #expect(specific.endpoint == "http://b:4318/custom", "the traces endpoint is used as it is")

        let named = try TracingSettings(environment: [
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_RESOURCE_ATTRIBUTES": "service.name=a,region=eu,service.name=b",
        ]).export
        #expect(named.serviceName == "b", "without OTEL_SERVICE_NAME, the resource's last service.name")
        let resource = OTLPTraceRequest.resource(
            serviceName: named.serviceName,
            attributes: named.resourceAttributes.map { ($0.name, $0.value) } + [("region", "us")])
        #expect(resource.filter { $0.key == "service.name" }.map(\.value) == ["b"])
        #expect(resource.filter { $0.key == "region" }.map(\.value) == ["us"], "the last of a repeated key wins")

        let headers = try TracingSettings(environment: [
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "a=1",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=2",
        ]).export
        #expect(headers.headers == [.init("b", "2")], "the traces-specific headers replace the general ones")

        #expect(defaults.unsupportedCompression == nil)
        let gzip = try TracingSettings(environment: [
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_COMPRESSION": "GZIP",
        ]).export
        #expect(gzip.unsupportedCompression == "OTEL_EXPORTER_OTLP_COMPRESSION", "asked for, not done: said at start")
        let none = try TracingSettings(environment: [
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none",
        ]).export
        #expect(none.unsupportedCompression == nil, "the traces-specific variable wins")
    }

    @Test(
        "an exporter setting that does not parse is an error naming its variable, never echoing a header",
        arguments: [
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"], "OTEL_EXPORTER_OTLP_ENDPOINT"),
            (["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://c/v1/traces"], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            (["OTEL_EXPORTER_OTLP_HEADERS": "secret-token-without-a-name"], "OTEL_EXPORTER_OTLP_HEADERS"),
            (["OTEL_EXPORTER_OTLP_HEADERS": "a=%zz"], "OTEL_EXPORTER_OTLP_HEADERS"),
            (["OTEL_EXPORTER_OTLP_TIMEOUT": "5s"], "OTEL_EXPORTER_OTLP_TIMEOUT"),
            (["OTEL_BSP_MAX_QUEUE_SIZE": "0"], "OTEL_BSP_MAX_QUEUE_SIZE"),
            (["OTEL_BSP_SCHEDULE_DELAY": "0"], "OTEL_BSP_SCHEDULE_DELAY"),
            (["OTEL_BSP_EXPORT_TIMEOUT": "0"], "OTEL_BSP_EXPORT_TIMEOUT"),
            (["OTEL_EXPORTER_OTLP_TIMEOUT": "99999999999999999"], "OTEL_EXPORTER_OTLP_TIMEOUT"),
            (["OTEL_TRACES_SAMPLER": "jaeger_remote"], "OTEL_TRACES_SAMPLER"),
            (["OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"], "OTEL_TRACES_SAMPLER_ARG"),
            (["OTEL_EXPORTER_OTLP_CLIENT_KEY": "/k.pem"], "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"),
            (["OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "zstd"], "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"),
        ])
    func badExportSetting(environment: [String: String], variable: String) {
        #expect {
            try TracingSettings(environment: environment.merging(["OTEL_TRACES_EXPORTER": "otlp"]) { $1 })
        } throws: { error in
            "\(error)".contains(variable) && !"\(error)".contains("secret-token")
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
        #expect(TraceParent.parse(header) != nil)
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
        #expect(TraceParent.parse(header) == nil)
    }
}
