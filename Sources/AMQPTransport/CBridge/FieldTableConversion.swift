internal import CRabbitMQ

// Field tables cross the C boundary in both directions here: decoding copies every value out of
// librabbitmq's memory; encoding builds the C structures inside a `CMemoryPool` the caller owns.

extension AMQPTable {
    /// Copies a C table into Swift values (nested tables and arrays included).
    init(copying table: amqp_table_t) {
        self.init()
        guard table.num_entries > 0, let entries = table.entries else { return }
        storage.reserveCapacity(Int(table.num_entries))
        for index in 0..<Int(table.num_entries) {
            let entry = entries[index]
            storage.append(Entry(key: entry.key.string, value: AMQPFieldValue(copying: entry.value)))
        }
    }

    /// Builds the C table inside `pool`; valid as long as the pool is.
    func encoded(in pool: CMemoryPool) -> amqp_table_t {
        guard !storage.isEmpty else { return amqp_empty_table }
        let entries = pool.allocate(amqp_table_entry_t.self, count: storage.count)
        for (index, entry) in storage.enumerated() {
            entries[index] = amqp_table_entry_t(key: pool.bytes(entry.key), value: entry.value.encoded(in: pool))
        }
        return amqp_table_t(num_entries: Int32(storage.count), entries: entries)
    }
}

extension AMQPFieldValue {
    private static func kind(_ kind: amqp_field_value_kind_t) -> UInt8 {
        UInt8(truncatingIfNeeded: kind.rawValue)
    }

    init(copying field: amqp_field_value_t) {
        let value = field.value
        switch field.kind {
        case Self.kind(AMQP_FIELD_KIND_BOOLEAN): self = .bool(value.boolean != 0)
        case Self.kind(AMQP_FIELD_KIND_I8): self = .int8(value.i8)
        case Self.kind(AMQP_FIELD_KIND_U8): self = .uint8(value.u8)
        case Self.kind(AMQP_FIELD_KIND_I16): self = .int16(value.i16)
        case Self.kind(AMQP_FIELD_KIND_U16): self = .uint16(value.u16)
        case Self.kind(AMQP_FIELD_KIND_I32): self = .int32(value.i32)
        case Self.kind(AMQP_FIELD_KIND_U32): self = .uint32(value.u32)
        case Self.kind(AMQP_FIELD_KIND_I64): self = .int64(value.i64)
        case Self.kind(AMQP_FIELD_KIND_U64): self = .uint64(value.u64)
        case Self.kind(AMQP_FIELD_KIND_F32): self = .float(value.f32)
        case Self.kind(AMQP_FIELD_KIND_F64): self = .double(value.f64)
        case Self.kind(AMQP_FIELD_KIND_DECIMAL):
            self = .decimal(scale: value.decimal.decimals, value: value.decimal.value)
        case Self.kind(AMQP_FIELD_KIND_UTF8):
            // RabbitMQ sends every long string as 'S'; bytes that are not UTF-8 stay bytes, of the same kind.
            let bytes = value.bytes.array
            if let string = String(validating: bytes, as: UTF8.self) {
                self = .string(string)
            } else {
                self = .undecodedString(bytes)
            }
        case Self.kind(AMQP_FIELD_KIND_BYTES): self = .bytes(value.bytes.array)
        case Self.kind(AMQP_FIELD_KIND_TIMESTAMP): self = .timestamp(value.u64)
        case Self.kind(AMQP_FIELD_KIND_TABLE): self = .table(AMQPTable(copying: value.table))
        case Self.kind(AMQP_FIELD_KIND_ARRAY):
            var elements: [AMQPFieldValue] = []
            if value.array.num_entries > 0, let entries = value.array.entries {
                elements.reserveCapacity(Int(value.array.num_entries))
                for index in 0..<Int(value.array.num_entries) {
                    elements.append(AMQPFieldValue(copying: entries[index]))
                }
            }
            self = .array(elements)
        default: self = .void
        }
    }

    func encoded(in pool: CMemoryPool) -> amqp_field_value_t {
        var field = amqp_field_value_t()
        switch self {
        case .bool(let bool):
            field.kind = Self.kind(AMQP_FIELD_KIND_BOOLEAN)
            field.value.boolean = bool ? 1 : 0
        case .int8(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_I8)
            field.value.i8 = value
        case .uint8(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_U8)
            field.value.u8 = value
        case .int16(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_I16)
            field.value.i16 = value
        case .uint16(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_U16)
            field.value.u16 = value
        case .int32(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_I32)
            field.value.i32 = value
        case .uint32(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_U32)
            field.value.u32 = value
        case .int64(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_I64)
            field.value.i64 = value
        case .uint64(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_U64)
            field.value.u64 = value
        case .float(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_F32)
            field.value.f32 = value
        case .double(let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_F64)
            field.value.f64 = value
        case .decimal(let scale, let value):
            field.kind = Self.kind(AMQP_FIELD_KIND_DECIMAL)
            field.value.decimal = amqp_decimal_t(decimals: scale, value: value)
        case .string(let string):
            field.kind = Self.kind(AMQP_FIELD_KIND_UTF8)
            field.value.bytes = pool.bytes(string)
        case .bytes(let bytes):
            field.kind = Self.kind(AMQP_FIELD_KIND_BYTES)
            field.value.bytes = pool.bytes(bytes)
        case .undecodedString(let bytes):
            field.kind = Self.kind(AMQP_FIELD_KIND_UTF8)
            field.value.bytes = pool.bytes(bytes)
        case .timestamp(let seconds):
            field.kind = Self.kind(AMQP_FIELD_KIND_TIMESTAMP)
            field.value.u64 = seconds
        case .table(let table):
            field.kind = Self.kind(AMQP_FIELD_KIND_TABLE)
            field.value.table = table.encoded(in: pool)
        case .array(let elements):
            field.kind = Self.kind(AMQP_FIELD_KIND_ARRAY)
            let entries = pool.allocate(amqp_field_value_t.self, count: elements.count)
            for (index, element) in elements.enumerated() {
                entries[index] = element.encoded(in: pool)
            }
            field.value.array = amqp_array_t(
                num_entries: Int32(elements.count), entries: elements.isEmpty ? nil : entries)
        case .void:
            field.kind = Self.kind(AMQP_FIELD_KIND_VOID)
        }
        return field
    }
}

/// Wire-format encoding of tables through librabbitmq's own codec: lets the unit tests prove the
/// conversion both ways without a broker.
enum FieldTableWireFormat {
    static func encode(_ table: AMQPTable) throws(AMQPError) -> [UInt8] {
        let pool = CMemoryPool()
        var cTable = table.encoded(in: pool)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        let status = buffer.withUnsafeMutableBytes { raw in
            amqp_encode_table(amqp_bytes_t(len: raw.count, bytes: raw.baseAddress), &cTable, &offset)
        }
        try LibraryReply.check(status: status, context: "encoding a field table")
        return Array(buffer[..<offset])
    }

    static func decode(_ bytes: [UInt8]) throws(AMQPError) -> AMQPTable {
        let pool = CMemoryPool()
        var cTable = amqp_table_t()
        var offset = 0
        var copy = bytes
        let status = copy.withUnsafeMutableBytes { raw in
            amqp_decode_table(amqp_bytes_t(len: raw.count, bytes: raw.baseAddress), pool.pool, &cTable, &offset)
        }
        try LibraryReply.check(status: status, context: "decoding a field table")
        return AMQPTable(copying: cTable)
    }
}
