#include "io/gguf.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace shardlm::io {
namespace {

constexpr uint32_t default_alignment = 32;
// Real files have a few thousand tensors and a few dozen keys; the counts are bounded by
// the bytes that could hold them anyway, this only names absurd ones early.
constexpr uint64_t max_tensors = uint64_t{1} << 20;
constexpr uint64_t max_keys = uint64_t{1} << 20;
constexpr uint32_t max_dims = 4;  // GGML_MAX_DIMS
constexpr int max_array_depth = 2;

// Reads the header front to back; every read checks the bytes left.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::string& source) : bytes_(bytes), source_(source) {}

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }
  std::string read_string(const char* what) {
    const uint64_t length = read<uint64_t>(what);
    need(length, what);
    std::string text(reinterpret_cast<const char*>(bytes_.data() + position_), length);
    position_ += length;
    return text;
  }
  // Fails unless `count` items of at least `least_bytes` each could follow.
  void check_count(uint64_t count, uint64_t least_bytes, const std::string& what) const {
    if (count > (bytes_.size() - position_) / least_bytes)
      fail(source_, ": ", what, " is ", count, ", more than the ", bytes_.size() - position_,
           " bytes left could hold: the file is truncated or not GGUF");
  }
  uint64_t position() const { return position_; }
  const std::string& source() const { return source_; }

 private:
  void need(uint64_t bytes, const char* what) const {
    if (bytes > bytes_.size() - position_)
      fail(source_, ": the file ends inside ", what, " (offset ", position_, " of ", bytes_.size(),
           " bytes): it is truncated");
  }
  std::span<const std::byte> bytes_;
  std::string source_;
  uint64_t position_ = 0;
};

uint64_t least_bytes_of(GgufValueType type) {
  switch (type) {
    case GgufValueType::u8: case GgufValueType::i8: case GgufValueType::boolean: return 1;
    case GgufValueType::u16: case GgufValueType::i16: return 2;
    case GgufValueType::u32: case GgufValueType::i32: case GgufValueType::f32: return 4;
    case GgufValueType::u64: case GgufValueType::i64: case GgufValueType::f64: return 8;
    case GgufValueType::string: return 8;  // its length
    case GgufValueType::array: return 12;  // its element type and count
  }
  return 1;
}

GgufValueType read_value_type(Cursor& cursor, const std::string& key) {
  const uint32_t type = cursor.read<uint32_t>("a metadata value type");
  if (type > static_cast<uint32_t>(GgufValueType::f64))
    fail(cursor.source(), ": metadata key '", key, "' has value type ", type,
         ", which GGUF does not define (0 - 12): the file is corrupt");
  return static_cast<GgufValueType>(type);
}

GgufValue read_value(Cursor& cursor, GgufValueType type, const std::string& key, int depth) {
  GgufValue value{.type = type, .data = int64_t{0}};
  switch (type) {
    case GgufValueType::u8: value.data = int64_t{cursor.read<uint8_t>("a u8 value")}; break;
    case GgufValueType::i8: value.data = int64_t{cursor.read<int8_t>("an i8 value")}; break;
    case GgufValueType::u16: value.data = int64_t{cursor.read<uint16_t>("a u16 value")}; break;
    case GgufValueType::i16: value.data = int64_t{cursor.read<int16_t>("an i16 value")}; break;
    case GgufValueType::u32: value.data = int64_t{cursor.read<uint32_t>("a u32 value")}; break;
    case GgufValueType::i32: value.data = int64_t{cursor.read<int32_t>("an i32 value")}; break;
    case GgufValueType::i64: value.data = cursor.read<int64_t>("an i64 value"); break;
    case GgufValueType::u64: {
      const uint64_t number = cursor.read<uint64_t>("a u64 value");
      if (number <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        value.data = static_cast<int64_t>(number);
      else
        value.data = number;
      break;
    }
    case GgufValueType::f32: value.data = double{cursor.read<float>("an f32 value")}; break;
    case GgufValueType::f64: value.data = cursor.read<double>("an f64 value"); break;
    case GgufValueType::boolean: {
      const uint8_t flag = cursor.read<uint8_t>("a bool value");
      if (flag > 1) fail(cursor.source(), ": metadata key '", key, "' holds bool ", int{flag}, ", not 0 or 1");
      value.data = flag == 1;
      break;
    }
    case GgufValueType::string: value.data = cursor.read_string("a string value"); break;
    case GgufValueType::array: {
      if (depth >= max_array_depth)
        fail(cursor.source(), ": metadata key '", key, "' nests arrays deeper than ", max_array_depth);
      const GgufValueType element = read_value_type(cursor, key);
      const uint64_t count = cursor.read<uint64_t>("an array length");
      cursor.check_count(count, least_bytes_of(element), str_cat("the length of array '", key, "'"));
      std::vector<GgufValue> items;
      items.reserve(count);
      for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(cursor, element, key, depth + 1));
      value.data = std::move(items);
      break;
    }
  }
  return value;
}

uint64_t checked_product(uint64_t a, uint64_t b, const std::string& where) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) fail(where, ": its size overflows 64 bits");
  return a * b;
}

GgufTensorInfo read_tensor_info(Cursor& cursor) {
  GgufTensorInfo info;
  info.name = cursor.read_string("a tensor name");
  const std::string where = str_cat(cursor.source(), ": tensor '", info.name, "'");
  const uint32_t dims = cursor.read<uint32_t>("a tensor's dimension count");
  if (dims == 0 || dims > max_dims) fail(where, " has ", dims, " dimensions; GGUF tensors have 1 to ", max_dims);
  uint64_t elements = 1;
  for (uint32_t d = 0; d < dims; ++d) {
    const uint64_t extent = cursor.read<uint64_t>("a tensor dimension");
    if (extent == 0 || extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(where, " has dimension ", d, " of ", extent, ": extents are 1 or more");
    info.dims.push_back(static_cast<int64_t>(extent));
    elements = checked_product(elements, extent, where);
  }
  const uint32_t type = cursor.read<uint32_t>("a tensor type");
  const std::optional<GgmlTypeInfo> type_info = ggml_type_info(type);
  if (!type_info) fail(where, " has type id ", type, ", which ggml never defined: the file is corrupt or newer");
  info.type = *type_info;
  if (info.dims[0] % info.type.block_elements != 0)
    fail(where, " is ", info.type.name, " with rows of ", info.dims[0], " values, not whole blocks of ",
         info.type.block_elements);
  info.elements = static_cast<int64_t>(elements);
  info.bytes = checked_product(elements / static_cast<uint64_t>(info.type.block_elements),
                               static_cast<uint64_t>(info.type.block_bytes), where);
  info.offset = cursor.read<uint64_t>("a tensor offset");
  return info;
}

const char* value_type_name(const GgufValue& value) { return gguf_value_type_name(value.type); }

}  // namespace

const char* gguf_value_type_name(GgufValueType type) {
  static constexpr const char* names[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                          "bool", "string", "array", "u64", "i64", "f64"};
  return names[static_cast<uint32_t>(type)];
}

Shape GgufTensorInfo::shape() const {
  std::vector<int64_t> reversed(dims.rbegin(), dims.rend());
  return Shape(reversed);
}

GgufFile GgufFile::parse(ByteRegion region, std::string source_name) {
  GgufFile file;
  file.source_name_ = std::move(source_name);
  file.region_ = std::move(region);
  const std::span<const std::byte> bytes = file.region_.bytes;
  const std::string& source = file.source_name_;
  Cursor cursor(bytes, source);
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "GGUF", 4) != 0)
    fail(source, ": not a GGUF file (it does not start with \"GGUF\")");
  cursor.read<uint32_t>("the magic");
  file.version_ = cursor.read<uint32_t>("the version");
  if (file.version_ != 2 && file.version_ != 3)
    fail(source, ": GGUF version ", file.version_, " is not supported (supported: 2 and 3)");
  const uint64_t tensor_count = cursor.read<uint64_t>("the tensor count");
  const uint64_t key_count = cursor.read<uint64_t>("the metadata count");
  if (tensor_count > max_tensors)
    fail(source, ": it declares ", tensor_count, " tensors, over the limit of ", max_tensors);
  if (key_count > max_keys) fail(source, ": it declares ", key_count, " metadata keys, over the limit of ", max_keys);
  cursor.check_count(key_count, 12, "the metadata count");
  for (uint64_t k = 0; k < key_count; ++k) {
    std::string key = cursor.read_string("a metadata key");
    const GgufValueType type = read_value_type(cursor, key);
    GgufValue value = read_value(cursor, type, key, 0);
    if (!file.metadata_.emplace(key, std::move(value)).second)
      fail(source, ": metadata key '", key, "' appears twice");
  }
  cursor.check_count(tensor_count, 24, "the tensor count");
  for (uint64_t t = 0; t < tensor_count; ++t) {
    GgufTensorInfo info = read_tensor_info(cursor);
    if (!file.tensor_index_.emplace(info.name, file.tensors_.size()).second)
      fail(source, ": tensor '", info.name, "' appears twice");
    file.tensors_.push_back(std::move(info));
  }
  uint64_t alignment = default_alignment;
  if (file.contains("general.alignment")) {
    const int64_t value = file.get_integer("general.alignment");
    if (value <= 0 || (value & (value - 1)) != 0 || value > (1 << 20))
      fail(source, ": general.alignment is ", value, "; it must be a power of two");
    alignment = static_cast<uint64_t>(value);
  }
  const uint64_t data_start = (cursor.position() + alignment - 1) / alignment * alignment;
  const uint64_t data_bytes = data_start <= bytes.size() ? bytes.size() - data_start : 0;
  file.data_section_ = bytes.data() + std::min<uint64_t>(data_start, bytes.size());
  for (const GgufTensorInfo& info : file.tensors_) {
    if (info.offset % alignment != 0)
      fail(source, ": tensor '", info.name, "' starts at offset ", info.offset, ", not a multiple of the alignment ",
           alignment);
    if (info.offset > data_bytes || info.bytes > data_bytes - info.offset)
      fail(source, ": tensor '", info.name, "' (", info.type.name, ", ", info.bytes, " bytes at offset ", info.offset,
           ") ends past the data section's ", data_bytes, " bytes: the file is truncated or corrupt");
  }
  return file;
}

GgufFile GgufFile::open(const std::string& path) { return parse(map_file(path), path); }

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto found = metadata_.find(key);
  return found == metadata_.end() ? nullptr : &found->second;
}

namespace {

const GgufValue& require_key(const GgufFile& file, const std::string& key) {
  const GgufValue* value = file.find(key);
  if (!value) fail(file.source_name(), ": metadata key '", key, "' is missing");
  return *value;
}

[[noreturn]] void wrong_type(const GgufFile& file, const std::string& key, const GgufValue& value,
                             const char* expected) {
  fail(file.source_name(), ": metadata key '", key, "' is ", value_type_name(value), ", expected ", expected);
}

int64_t as_integer(const GgufFile& file, const std::string& key, const GgufValue& value) {
  if (const auto* number = std::get_if<int64_t>(&value.data)) return *number;
  if (std::holds_alternative<uint64_t>(value.data))
    fail(file.source_name(), ": metadata key '", key, "' is ", std::get<uint64_t>(value.data),
         ", beyond the range of a signed 64-bit integer");
  wrong_type(file, key, value, "an integer");
}

double as_number(const GgufFile& file, const std::string& key, const GgufValue& value) {
  if (const auto* number = std::get_if<double>(&value.data)) return *number;
  if (std::holds_alternative<bool>(value.data) || std::holds_alternative<std::string>(value.data) ||
      std::holds_alternative<std::vector<GgufValue>>(value.data))
    wrong_type(file, key, value, "a number");
  return static_cast<double>(as_integer(file, key, value));
}

const std::vector<GgufValue>& as_array(const GgufFile& file, const std::string& key) {
  const GgufValue& value = require_key(file, key);
  const auto* items = std::get_if<std::vector<GgufValue>>(&value.data);
  if (!items) wrong_type(file, key, value, "an array");
  return *items;
}

}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& value = require_key(*this, key);
  const auto* text = std::get_if<std::string>(&value.data);
  if (!text) wrong_type(*this, key, value, "a string");
  return *text;
}

int64_t GgufFile::get_integer(const std::string& key) const { return as_integer(*this, key, require_key(*this, key)); }

double GgufFile::get_number(const std::string& key) const { return as_number(*this, key, require_key(*this, key)); }

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& value = require_key(*this, key);
  const auto* flag = std::get_if<bool>(&value.data);
  if (!flag) wrong_type(*this, key, value, "a bool");
  return *flag;
}

std::vector<std::string> GgufFile::get_strings(const std::string& key) const {
  std::vector<std::string> texts;
  for (const GgufValue& item : as_array(*this, key)) {
    const auto* text = std::get_if<std::string>(&item.data);
    if (!text)
      fail(source_name_, ": metadata key '", key, "' is an array of ", value_type_name(item), ", expected strings");
    texts.push_back(*text);
  }
  return texts;
}

std::vector<int64_t> GgufFile::get_integers(const std::string& key) const {
  std::vector<int64_t> numbers;
  for (const GgufValue& item : as_array(*this, key)) numbers.push_back(as_integer(*this, key, item));
  return numbers;
}

std::vector<double> GgufFile::get_numbers(const std::string& key) const {
  std::vector<double> numbers;
  for (const GgufValue& item : as_array(*this, key)) numbers.push_back(as_number(*this, key, item));
  return numbers;
}

const GgufTensorInfo& GgufFile::tensor_info(const std::string& name) const {
  const auto found = tensor_index_.find(name);
  if (found == tensor_index_.end()) fail(source_name_, ": there is no tensor '", name, "'");
  return tensors_[found->second];
}

std::span<const std::byte> GgufFile::tensor_bytes(const std::string& name) const {
  const GgufTensorInfo& info = tensor_info(name);
  return {data_section_ + info.offset, info.bytes};
}

const GgufTensorInfo& GgufFile::readable_tensor_info(const std::string& name) const {
  const GgufTensorInfo& info = tensor_info(name);
  if (!info.type.readable)
    fail(source_name_, ": tensor '", name, "' is ", info.type.name, ", which shardlm cannot read (it reads ",
         readable_ggml_types(), "): convert the file with llama.cpp's llama-quantize to one of those");
  return info;
}

Tensor GgufFile::weight(const std::string& name) const {
  const GgufTensorInfo& info = readable_tensor_info(name);
  try {
    return ggml_weight(static_cast<GgmlType>(info.type.id), region_.owner, tensor_bytes(name).data(), info.shape());
  } catch (const Error& error) {
    fail(source_name_, ": tensor '", name, "': ", error.what());
  }
}

Tensor GgufFile::dequantized(const std::string& name) const {
  const GgufTensorInfo& info = readable_tensor_info(name);
  Tensor out = Tensor::empty(info.shape(), DType::f32);
  dequantize_ggml(static_cast<GgmlType>(info.type.id), tensor_bytes(name).data(), out.mutable_data<float>(),
                  info.elements);
  return out;
}

}  // namespace shardlm::io
