//===- SplitCUDA.cpp - model.cu as several translation units --------------===//
//
// The printer's text is: a header (the prelude: helpers and shape-generic
// kernels as templates in an anonymous namespace, then includes and
// defines), "// ---- generated kernels ----", the generated kernels (each
// `__global__ void __launch_bounds__(256) NAME(...) {...}`, with the
// `__device__ const` tables they read, which kernels may share), then the
// host code (epilogues, tensor table, step functions, model spec, main).
//
// A kernel unit repeats the header (its templates have internal linkage, so
// every unit instantiates what it uses) and the tables its kernels name
// (namespace-scope `const`: internal linkage, so a copy per unit is legal).
// The host unit declares every generated kernel (they have external
// linkage: the launch in the host unit calls the stub nvcc generates in the
// kernel's unit; no relocatable device code is needed, as no device code
// calls across units).
//
//===----------------------------------------------------------------------===//

#include "cnnc/Target/CUDA/SplitCUDA.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <optional>

using namespace cnnc;
using llvm::StringRef;

namespace {

constexpr StringRef kKernelsMarker = "// ---- generated kernels ----\n";
constexpr StringRef kLRDefinition = "const float cnncDefaultLR = ";

struct Item {
  StringRef text; ///< the whole definition, through its last newline
  StringRef name;
  StringRef header; ///< a kernel's text before the body's '{'
  bool kernel = false;
};

bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_'; }

/// The end of the definition starting at `from` in `s`: the position after
/// the closing '}' of its first brace group (kernel) or after the ';' at
/// depth 0 (table). Skips comments and string and character literals.
std::optional<size_t> definitionEnd(StringRef s, size_t from, bool kernel) {
  int depth = 0;
  for (size_t i = from; i < s.size(); ++i) {
    char c = s[i];
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      i = s.find('\n', i);
      if (i == StringRef::npos)
        return std::nullopt;
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      i = s.find("*/", i + 2);
      if (i == StringRef::npos)
        return std::nullopt;
      ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      for (++i; i < s.size() && s[i] != c; ++i)
        if (s[i] == '\\')
          ++i;
      if (i >= s.size())
        return std::nullopt;
      continue;
    }
    if (c == '{') {
      ++depth;
    } else if (c == '}') {
      if (--depth < 0)
        return std::nullopt;
      if (depth == 0 && kernel)
        return i + 1;
    } else if (c == ';' && depth == 0 && !kernel) {
      return i + 1;
    }
  }
  return std::nullopt;
}

/// The identifier that ends right before position `end` of `s`.
StringRef identBefore(StringRef s, size_t end) {
  while (end > 0 && s[end - 1] == ' ')
    --end;
  size_t begin = end;
  while (begin > 0 && isIdentChar(s[begin - 1]))
    --begin;
  return s.slice(begin, end);
}

/// Parses the generated-kernels section into items; stops at the first
/// top-level line that starts neither a table nor a kernel (the host code)
/// and sets `hostBegin` there. None where the text is not in that form.
std::optional<std::vector<Item>> parseKernels(StringRef s, size_t &hostBegin) {
  std::vector<Item> items;
  size_t pos = 0;
  while (true) {
    while (pos < s.size() && s[pos] == '\n')
      ++pos;
    StringRef rest = s.substr(pos);
    bool table = rest.starts_with("__device__ const ");
    bool kernel = rest.starts_with("__global__ ");
    if (!table && !kernel)
      break;
    std::optional<size_t> end = definitionEnd(s, pos, kernel);
    if (!end)
      return std::nullopt;
    size_t stop = s.find('\n', *end);
    stop = stop == StringRef::npos ? s.size() : stop + 1;
    Item item;
    item.text = s.slice(pos, stop);
    item.kernel = kernel;
    if (kernel) {
      // NAME is the identifier before the last '(' at depth 0 of the
      // header (__launch_bounds__(256) comes before it).
      size_t brace = item.text.find('{');
      if (brace == StringRef::npos)
        return std::nullopt;
      item.header = item.text.take_front(brace).rtrim();
      int depth = 0;
      for (size_t i = 0; i < item.header.size(); ++i) {
        if (item.header[i] == '(' && depth++ == 0)
          item.name = identBefore(item.header, i);
        else if (item.header[i] == ')')
          --depth;
      }
    } else {
      size_t bracket = item.text.find('[');
      if (bracket == StringRef::npos)
        return std::nullopt;
      item.name = identBefore(item.text, bracket);
    }
    if (item.name.empty())
      return std::nullopt;
    items.push_back(item);
    pos = stop;
  }
  hostBegin = pos;
  return items;
}

/// Whether `text` holds `name` as a whole identifier.
bool mentions(StringRef text, StringRef name) {
  for (size_t at = text.find(name); at != StringRef::npos;
       at = text.find(name, at + 1)) {
    bool startOk = at == 0 || !isIdentChar(text[at - 1]);
    size_t end = at + name.size();
    bool endOk = end >= text.size() || !isIdentChar(text[end]);
    if (startOk && endOk)
      return true;
  }
  return false;
}

/// The names of the structs the header defines (the prelude's parameter
/// blocks): in its anonymous namespace, so a kernel whose signature names
/// one cannot be declared in another unit.
std::vector<StringRef> headerStructs(StringRef header) {
  std::vector<StringRef> names;
  for (size_t at = header.find("struct "); at != StringRef::npos;
       at = header.find("struct ", at + 7)) {
    size_t b = at + 7, e = b;
    while (e < header.size() && isIdentChar(header[e]))
      ++e;
    if (e > b)
      names.push_back(header.slice(b, e));
  }
  return names;
}

} // namespace

std::vector<CUDATranslationUnit>
cnnc::splitCUDATranslationUnits(StringRef cu, unsigned maxKernelUnits) {
  std::vector<CUDATranslationUnit> whole = {{"model", cu.str(), false}};
  size_t marker = cu.find(kKernelsMarker);
  if (maxKernelUnits == 0 || marker == StringRef::npos)
    return whole;
  StringRef header = cu.take_front(marker);
  StringRef section = cu.substr(marker + kKernelsMarker.size());
  size_t hostBegin = 0;
  std::optional<std::vector<Item>> items = parseKernels(section, hostBegin);
  if (!items)
    return whole;
  StringRef host = section.substr(hostBegin);
  std::vector<const Item *> kernels, tables;
  size_t kernelBytes = 0;
  std::vector<StringRef> structs = headerStructs(header);
  for (const Item &item : *items) {
    (item.kernel ? kernels : tables).push_back(&item);
    if (!item.kernel)
      continue;
    kernelBytes += item.text.size();
    for (StringRef s : structs)
      if (mentions(item.header, s))
        return whole;
  }
  if (kernels.empty())
    return whole;

  // The learning-rate default on its own line (the printer's
  // `const float cnncDefaultLR = <value>;`): in a host-only unit of its own.
  std::string hostText = host.str(), hyper;
  size_t lr = hostText.find(kLRDefinition);
  if (lr != std::string::npos && (lr == 0 || hostText[lr - 1] == '\n')) {
    size_t end = hostText.find('\n', lr);
    end = end == std::string::npos ? hostText.size() : end + 1;
    hyper = "// The run-time hyperparameters of the model, apart from its "
            "kernels.\nextern " +
            hostText.substr(lr, end - lr);
    hostText.erase(lr, end - lr);
  }

  auto tablesFor = [&](StringRef text) {
    std::string out;
    for (const Item *t : tables)
      if (mentions(text, t->name))
        out += t->text.str() + "\n";
    return out;
  };

  std::vector<CUDATranslationUnit> units;
  unsigned n = std::min<size_t>(maxKernelUnits, kernels.size());
  size_t done = 0, next = 0;
  for (unsigned u = 0; u < n; ++u) {
    // Kernels in order, cut where the running size passes the unit's share
    // (at least one kernel per unit).
    size_t target = kernelBytes * (u + 1) / n;
    std::string body;
    size_t first = next;
    while (next < kernels.size() &&
           (next == first || done + kernels[next]->text.size() <= target ||
            u + 1 == n) &&
           kernels.size() - next > n - u - 1) {
      body += kernels[next]->text.str() + "\n";
      done += kernels[next]->text.size();
      ++next;
    }
    units.push_back(
        {"kernels" + std::to_string(u),
         header.str() + kKernelsMarker.str() + tablesFor(body) + body, false});
  }
  std::string decls =
      "// ---- generated kernels: declared here, defined in the kernel "
      "units ----\n";
  for (const Item *k : kernels)
    decls += k->header.str() + ";\n";
  units.push_back({"host",
                   header.str() + decls + tablesFor(hostText) + "\n" + hostText,
                   false});
  if (!hyper.empty())
    units.push_back({"hyper", hyper, true});
  return units;
}
