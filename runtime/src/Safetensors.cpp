//===- Safetensors.cpp - the safetensors weights format -------------------===//
//
// The interchange format of PyTorch users (safetensors.torch.load_file):
// u64 header length, a JSON header, the raw little-endian data. The reader
// applies the safetensors crate's validation (the header size limit, a JSON
// object that starts with '{', byte ranges that tile the data exactly) plus
// cnnrt's shape rule (checkShape), and reports each violation as one message
// naming the file and the tensor. The JSON parser is a small strict one: the
// runtime links no JSON library (it is pure C++17, also linked by generated
// executables).
//
//===----------------------------------------------------------------------===//

#include "cnnrt/TensorFile.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

namespace cnnrt {

namespace {

/// The safetensors crate's limit (MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeader = 100000000;
/// Deeper JSON nesting than a valid header has is rejected before the
/// recursive parser could exhaust the stack.
constexpr int kMaxDepth = 16;

struct JValue {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  std::string text; ///< a string's value or a number's literal
  std::vector<JValue> items;
  std::vector<std::pair<std::string, JValue>> members;
};

const char *kindName(JValue::Kind k) {
  switch (k) {
  case JValue::Null:
    return "null";
  case JValue::Bool:
    return "a boolean";
  case JValue::Number:
    return "a number";
  case JValue::String:
    return "a string";
  case JValue::Array:
    return "an array";
  case JValue::Object:
    return "an object";
  }
  return "?";
}

/// Strict JSON (RFC 8259) over the header bytes.
class JsonParser {
public:
  JsonParser(const std::string &s, std::string &why) : s_(s), why_(why) {}

  bool parseDocument(JValue &v) {
    skipSpace();
    if (!parseValue(v, 0))
      return false;
    skipSpace();
    if (pos_ != s_.size())
      return error("unexpected data after the JSON object");
    return true;
  }

private:
  const std::string &s_;
  std::string &why_;
  size_t pos_ = 0;

  bool error(const std::string &what) {
    why_ = what + " at byte " + std::to_string(pos_) + " of the header";
    return false;
  }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0)
      return error("invalid JSON value");
    pos_ += n;
    return true;
  }
  bool parseValue(JValue &v, int depth) {
    if (depth > kMaxDepth)
      return error("JSON nested deeper than " + std::to_string(kMaxDepth) +
                   " levels");
    if (pos_ >= s_.size())
      return error("unexpected end of the JSON header");
    char c = s_[pos_];
    if (c == '{')
      return parseObject(v, depth);
    if (c == '[')
      return parseArray(v, depth);
    if (c == '"') {
      v.kind = JValue::String;
      return parseString(v.text);
    }
    if (c == 't' || c == 'f') {
      v.kind = JValue::Bool;
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      v.kind = JValue::Null;
      return literal("null");
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(v);
    return error(std::string("unexpected character '") + c + "'");
  }
  bool parseObject(JValue &v, int depth) {
    v.kind = JValue::Object;
    ++pos_; // '{'
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    // (A set, not a scan of the members: a header may name 10^5 tensors.)
    std::unordered_set<std::string> seen;
    for (;;) {
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"')
        return error("expected a string key");
      std::string key;
      if (!parseString(key))
        return false;
      if (!seen.insert(key).second)
        return error("duplicate key \"" + key + "\"");
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':')
        return error("expected ':'");
      ++pos_;
      skipSpace();
      v.members.emplace_back(std::move(key), JValue());
      if (!parseValue(v.members.back().second, depth + 1))
        return false;
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return error("expected ',' or '}'");
    }
  }
  bool parseArray(JValue &v, int depth) {
    v.kind = JValue::Array;
    ++pos_; // '['
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skipSpace();
      v.items.emplace_back();
      if (!parseValue(v.items.back(), depth + 1))
        return false;
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return error("expected ',' or ']'");
    }
  }
  bool hex4(uint32_t &cp) {
    if (s_.size() - pos_ < 4)
      return error("truncated \\u escape");
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9')
        cp |= h - '0';
      else if (h >= 'a' && h <= 'f')
        cp |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        cp |= h - 'A' + 10;
      else
        return error("bad \\u escape");
    }
    return true;
  }
  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  bool parseString(std::string &out) {
    ++pos_; // '"'
    out.clear();
    for (;;) {
      if (pos_ >= s_.size())
        return error("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20)
        return error("control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      if (++pos_ >= s_.size())
        return error("unterminated string");
      char e = s_[pos_++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp))
          return false;
        if (cp >= 0xdc00 && cp <= 0xdfff)
          return error("unpaired surrogate in a \\u escape");
        if (cp >= 0xd800 && cp <= 0xdbff) {
          uint32_t lo;
          if (s_.compare(pos_, 2, "\\u") != 0)
            return error("unpaired surrogate in a \\u escape");
          pos_ += 2;
          if (!hex4(lo))
            return false;
          if (lo < 0xdc00 || lo > 0xdfff)
            return error("unpaired surrogate in a \\u escape");
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        --pos_;
        return error(std::string("bad escape '\\") + e + "'");
      }
    }
  }
  bool parseNumber(JValue &v) {
    v.kind = JValue::Number;
    size_t start = pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')
        ++pos_;
      return pos_ - d;
    };
    if (s_[pos_] == '-')
      ++pos_;
    size_t intStart = pos_;
    size_t n = digits();
    if (n == 0)
      return error("bad number");
    if (n > 1 && s_[intStart] == '0')
      return error("number with a leading zero");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0)
        return error("bad number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-'))
        ++pos_;
      if (digits() == 0)
        return error("bad number");
    }
    v.text = s_.substr(start, pos_ - start);
    return true;
  }
};

/// A JSON number that is a non-negative integer fitting in uint64 (the
/// crate's usize fields).
bool toUnsigned(const JValue &v, uint64_t &out) {
  if (v.kind != JValue::Number || v.text.empty())
    return false;
  out = 0;
  for (char c : v.text) {
    if (c < '0' || c > '9')
      return false;
    if (__builtin_mul_overflow(out, uint64_t(10), &out) ||
        __builtin_add_overflow(out, uint64_t(c - '0'), &out))
      return false;
  }
  return true;
}

struct DTypeName {
  const char *name;
  DType dtype;
};
const DTypeName kDTypes[] = {{"F32", DType::F32},
                             {"F16", DType::F16},
                             {"I32", DType::I32},
                             {"I64", DType::I64}};

/// The other dtypes of the format: named in the error as unsupported rather
/// than unknown.
bool isOtherSafetensorsDType(const std::string &s) {
  static const char *const others[] = {
      "BOOL", "U8",      "I8",      "I16",     "U16",     "BF16",
      "U32",  "U64",     "F64",     "F4",      "F6_E2M3", "F6_E3M2",
      "E8M0", "F8_E4M3", "F8_E5M2", "F8_E8M0", "C64"};
  for (const char *o : others)
    if (s == o)
      return true;
  return false;
}

const char *safetensorsName(DType dt) {
  for (const DTypeName &d : kDTypes)
    if (d.dtype == dt)
      return d.name;
  return nullptr;
}

/// A JSON string as Python's json.dumps(ensure_ascii=False) writes it (so
/// the C++ and Python writers give the same bytes): UTF-8 as is, the short
/// escapes where JSON has them, other control characters as \u00xx.
std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        static const char hex[] = "0123456789abcdef";
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += ch;
      }
    }
  }
  return out + "\"";
}

std::string dimsText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// One tensor of the header before its data is copied.
struct Pending {
  TensorEntry entry;
  uint64_t begin = 0, end = 0;
  size_t index = 0; ///< position in the header
};

/// Validates one "name": {...} member of the header.
bool parseTensorInfo(const std::string &name, const JValue &v,
                     uint64_t dataSize, const std::string &path, Pending &p,
                     std::string &err) {
  auto bad = [&](const std::string &what) {
    err = path + ": tensor '" + name + "': " + what;
    return false;
  };
  if (name.empty()) {
    err = path + ": a tensor has an empty name";
    return false;
  }
  if (v.kind != JValue::Object)
    return bad(std::string("its header entry is ") + kindName(v.kind) +
               ", not an object");
  const JValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (const auto &m : v.members) {
    if (m.first == "dtype")
      dtype = &m.second;
    else if (m.first == "shape")
      shape = &m.second;
    else if (m.first == "data_offsets")
      offsets = &m.second;
    else
      return bad("unknown key \"" + m.first +
                 "\" (expected dtype, shape, data_offsets)");
  }
  if (!dtype || !shape || !offsets)
    return bad(std::string("missing \"") +
               (!dtype   ? "dtype"
                : !shape ? "shape"
                         : "data_offsets") +
               "\"");
  if (dtype->kind != JValue::String)
    return bad("dtype is not a string");
  bool found = false;
  for (const DTypeName &d : kDTypes)
    if (dtype->text == d.name) {
      p.entry.dtype = d.dtype;
      found = true;
    }
  if (!found)
    return bad((isOtherSafetensorsDType(dtype->text) ? "unsupported dtype '"
                                                     : "unknown dtype '") +
               dtype->text + "' (cnnc reads F32, F16, I32 and I64)");
  if (shape->kind != JValue::Array)
    return bad("shape is not an array");
  if (shape->items.size() > kMaxRank)
    return bad("rank " + std::to_string(shape->items.size()) +
               " exceeds the maximum " + std::to_string(kMaxRank));
  for (const JValue &d : shape->items) {
    uint64_t u;
    if (!toUnsigned(d, u) || u > uint64_t(INT64_MAX))
      return bad(
          "shape has an entry that is not a non-negative 64-bit "
          "integer" +
          (d.kind == JValue::Number ? " (" + d.text + ")" : std::string()));
    p.entry.shape.push_back(static_cast<int64_t>(u));
  }
  uint64_t nbytes;
  std::string why;
  if (!checkShape(p.entry.shape, p.entry.dtype, nbytes, why))
    return bad(why);
  if (offsets->kind != JValue::Array || offsets->items.size() != 2 ||
      !toUnsigned(offsets->items[0], p.begin) ||
      !toUnsigned(offsets->items[1], p.end))
    return bad("data_offsets is not a pair [begin, end] of non-negative "
               "integers");
  if (p.end < p.begin)
    return bad("data_offsets [" + std::to_string(p.begin) + ", " +
               std::to_string(p.end) + "] end before they begin");
  if (p.end > dataSize)
    return bad("data_offsets [" + std::to_string(p.begin) + ", " +
               std::to_string(p.end) + "] run past the end of the data (" +
               std::to_string(dataSize) +
               " bytes after the header; truncated file?)");
  if (p.end - p.begin != nbytes)
    return bad("dtype " + dtype->text + " and shape " +
               dimsText(p.entry.shape) + " need " + std::to_string(nbytes) +
               " bytes but data_offsets [" + std::to_string(p.begin) + ", " +
               std::to_string(p.end) + "] hold " +
               std::to_string(p.end - p.begin));
  p.entry.name = name;
  return true;
}

} // namespace

bool isSafetensorsPath(const std::string &path) {
  static const char ext[] = ".safetensors";
  const size_t n = sizeof(ext) - 1;
  if (path.size() < n)
    return false;
  for (size_t i = 0; i < n; ++i) {
    char c = path[path.size() - n + i];
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
    if (c != ext[i])
      return false;
  }
  return true;
}

bool parseSafetensors(const char *data, size_t size, const std::string &path,
                      std::vector<TensorEntry> &out, std::string &err,
                      SafetensorsMetadata *metadata) {
  out.clear();
  if (metadata)
    metadata->clear();
  if (size < 8) {
    err = "truncated file " + path + ": " + std::to_string(size) +
          " bytes, less than the 8-byte header length of a safetensors file";
    return false;
  }
  uint64_t n;
  std::memcpy(&n, data, 8);
  if (n > kMaxHeader) {
    err = path + ": safetensors header length " + std::to_string(n) +
          " exceeds the format's limit of " + std::to_string(kMaxHeader) +
          " bytes (not a safetensors file?)";
    return false;
  }
  if (n > size - 8) {
    err = "truncated file " + path + ": the safetensors header length " +
          std::to_string(n) + " runs past the end of the file (" +
          std::to_string(size) + " bytes)";
    return false;
  }
  std::string header(data + 8, static_cast<size_t>(n));
  if (!isValidUtf8(header)) {
    err = path + ": the safetensors header is not UTF-8";
    return false;
  }
  if (header.empty() || header[0] != '{') {
    err = path + ": the safetensors header does not start with '{'";
    return false;
  }
  JValue root;
  std::string why;
  if (!JsonParser(header, why).parseDocument(root)) {
    err = path + ": the safetensors header is not valid JSON: " + why;
    return false;
  }
  const char *const base = data + 8 + n;
  const uint64_t dataSize = size - 8 - n;
  std::vector<Pending> tensors;
  tensors.reserve(root.members.size());
  for (const auto &m : root.members) {
    if (m.first == "__metadata__") {
      if (m.second.kind != JValue::Object) {
        err = path + ": __metadata__ is " + kindName(m.second.kind) +
              ", not an object of strings";
        return false;
      }
      for (const auto &kv : m.second.members) {
        if (kv.second.kind != JValue::String) {
          err = path + ": __metadata__ value of \"" + kv.first + "\" is " +
                kindName(kv.second.kind) + ", not a string";
          return false;
        }
        if (metadata)
          metadata->emplace_back(kv.first, kv.second.text);
      }
      continue;
    }
    Pending p;
    if (!parseTensorInfo(m.first, m.second, dataSize, path, p, err))
      return false;
    tensors.push_back(std::move(p));
  }
  // The byte ranges must tile the data: sorted by offset, each begins where
  // the previous ended, and the last ends at the end of the file.
  // (Header order breaks ties: empty tensors may share an offset.)
  for (size_t i = 0; i < tensors.size(); ++i)
    tensors[i].index = i;
  std::sort(tensors.begin(), tensors.end(),
            [](const Pending &a, const Pending &b) {
              if (a.begin != b.begin)
                return a.begin < b.begin;
              return a.end != b.end ? a.end < b.end : a.index < b.index;
            });
  uint64_t at = 0;
  const Pending *prev = nullptr;
  for (const Pending &p : tensors) {
    if (p.begin != at) {
      err = path + ": tensor '" + p.entry.name + "' data_offsets [" +
            std::to_string(p.begin) + ", " + std::to_string(p.end) + "] " +
            (p.begin < at ? "overlap" : "leave a gap after") +
            (prev ? " tensor '" + prev->entry.name + "' (which ends at " +
                        std::to_string(at) + ")"
                  : std::string(" the start of the data"));
      return false;
    }
    at = p.end;
    prev = &p;
  }
  if (at != dataSize) {
    err = path + ": " + std::to_string(dataSize - at) +
          " bytes after the last tensor's data (the tensors end at byte " +
          std::to_string(at) + " of " + std::to_string(dataSize) + ")";
    return false;
  }
  out.reserve(tensors.size());
  for (Pending &p : tensors) {
    p.entry.data.assign(base + p.begin, base + p.end);
    out.push_back(std::move(p.entry));
  }
  return true;
}

bool readSafetensors(const std::string &path, std::vector<TensorEntry> &out,
                     std::string &err, SafetensorsMetadata *metadata) {
  out.clear();
  std::vector<char> buf;
  if (!readFileBytes(path, buf, err))
    return false;
  return parseSafetensors(buf.data(), buf.size(), path, out, err, metadata);
}

bool serializeSafetensors(const std::vector<TensorEntry> &entries,
                          const SafetensorsMetadata &metadata,
                          std::string &bytes, std::string &err) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      if (!isValidUtf8(metadata[i].first) || !isValidUtf8(metadata[i].second)) {
        err = "metadata '" + metadata[i].first + "' is not UTF-8";
        return false;
      }
      for (size_t j = 0; j < i; ++j)
        if (metadata[j].first == metadata[i].first) {
          err = "duplicate metadata key '" + metadata[i].first + "'";
          return false;
        }
      header += (i ? "," : "") + jsonString(metadata[i].first) + ":" +
                jsonString(metadata[i].second);
    }
    header += "}";
  }
  uint64_t offset = 0;
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry &e = entries[i];
    if (e.name.empty() || !isValidUtf8(e.name) || e.name == "__metadata__") {
      err = e.name.empty()
                ? "a tensor has an empty name"
                : "tensor name '" + e.name + "' is not UTF-8 or is reserved";
      return false;
    }
    if (!names.insert(e.name).second) {
      err = "duplicate tensor name '" + e.name + "'";
      return false;
    }
    const char *dt = safetensorsName(e.dtype);
    uint64_t nbytes;
    std::string why;
    if (!dt) {
      err = "tensor '" + e.name + "' has an invalid dtype";
      return false;
    }
    if (!checkShape(e.shape, e.dtype, nbytes, why)) {
      err = "tensor '" + e.name + "': " + why;
      return false;
    }
    if (e.data.size() != nbytes) {
      err = "tensor '" + e.name + "' holds " + std::to_string(e.data.size()) +
            " bytes but its shape and dtype need " + std::to_string(nbytes);
      return false;
    }
    header += std::string(metadata.empty() && i == 0 ? "" : ",") +
              jsonString(e.name) + ":{\"dtype\":\"" + dt + "\",\"shape\":[";
    for (size_t d = 0; d < e.shape.size(); ++d)
      header += (d ? "," : "") + std::to_string(e.shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
  }
  header += "}";
  // Padded with spaces so that the data starts 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeader) {
    err = "the safetensors header would be " + std::to_string(header.size()) +
          " bytes, more than the format's limit of " +
          std::to_string(kMaxHeader);
    return false;
  }
  bytes.clear();
  bytes.reserve(8 + header.size() + offset);
  uint64_t n = header.size();
  bytes.append(reinterpret_cast<const char *>(&n), 8);
  bytes += header;
  for (const TensorEntry &e : entries)
    bytes.append(e.data.data(), e.data.size());
  return true;
}

bool writeSafetensors(const std::string &path,
                      const std::vector<TensorEntry> &entries, std::string &err,
                      const SafetensorsMetadata *metadata) {
  static const SafetensorsMetadata kDefault = {{"format", "pt"}};
  std::string bytes;
  if (!serializeSafetensors(entries, metadata ? *metadata : kDefault, bytes,
                            err))
    return false;
  return writeFileAtomic(path, bytes, err);
}

} // namespace cnnrt
