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
// The host code may be cut anywhere between two launches because no kernel
// keeps state in a namespace-scope `__device__` variable: every unit that
// repeats the prelude would get its own copy, so a partial-sum kernel
// launched from one host unit and its finishing kernel launched from
// another would read different arrays (session 24's nhwcScratch: dm-NFNet
// trained wrong). The prelude's reductions take their scratch as a pointer
// (Context::reductionScratch); mutableDeviceVariables finds a variable that
// would break this, and the host split refuses text that has one.
//
//===----------------------------------------------------------------------===//

#include "cnnc/Target/CUDA/SplitCUDA.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

using namespace cnnc;
using llvm::ArrayRef;
using llvm::SmallVector;
using llvm::StringRef;
using llvm::Twine;

namespace {

constexpr StringRef kKernelsMarker = "// ---- generated kernels ----\n";
constexpr StringRef kLRDefinition = "const float cnncDefaultLR = ";
constexpr StringRef kStatic = "static ";

struct Item {
  StringRef text; ///< the whole definition, through its last newline
  StringRef name;
  StringRef header; ///< a kernel's text before the body's '{'
  bool kernel = false;
};

bool isIdentChar(char c) { return llvm::isAlnum(c) || c == '_'; }

/// Where the comment or string or character literal that starts at `i` of
/// `s` ends (its last character: the newline of a line comment), `i` where
/// none starts there, StringRef::npos where it does not end.
size_t skipCommentOrLiteral(StringRef s, size_t i) {
  char c = s[i];
  if (c == '/' && i + 1 < s.size() && s[i + 1] == '/')
    return s.find('\n', i);
  if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
    size_t end = s.find("*/", i + 2);
    return end == StringRef::npos ? end : end + 1;
  }
  if (c == '"' || c == '\'') {
    for (++i; i < s.size() && s[i] != c; ++i)
      if (s[i] == '\\')
        ++i;
    return i < s.size() ? i : StringRef::npos;
  }
  return i;
}

/// The end of the definition starting at `from` in `s`: the position after
/// the closing '}' of its first brace group (kernel) or after the ';' at
/// depth 0 (table). Skips comments and string and character literals.
std::optional<size_t> definitionEnd(StringRef s, size_t from, bool kernel) {
  int depth = 0;
  for (size_t i = from; i < s.size(); ++i) {
    size_t skipped = skipCommentOrLiteral(s, i);
    if (skipped == StringRef::npos)
      return std::nullopt;
    if (skipped != i) {
      i = skipped;
      continue;
    }
    char c = s[i];
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

/// A kernel unit's header: the prelude without the runtime's header where
/// neither the prelude nor the unit's kernels name the runtime. cnnrt.h
/// (<string>, <stdexcept>, the Context) is host code that nvcc's front end
/// (cudafe++) and its device compiler (cicc) parse again in every unit:
/// ~40% of an empty kernel unit's compile time. Only `#include
/// <cuda_runtime.h>` of it is needed by device code, and the line is
/// replaced, not removed, so that the prelude keeps its line numbers.
std::string kernelUnitHeader(StringRef header, StringRef kernels) {
  constexpr StringRef kRuntimeInclude = "#include \"cnnrt/cnnrt.h\"\n";
  size_t at = header.find(kRuntimeInclude);
  if (at == StringRef::npos || (at != 0 && header[at - 1] != '\n'))
    return header.str();
  std::string rest =
      (header.take_front(at) + header.substr(at + kRuntimeInclude.size()))
          .str();
  for (StringRef text : {StringRef(rest), kernels})
    if (text.contains("cnnrt") || text.contains("CNNRT"))
      return header.str();
  return header.take_front(at).str() + "#include <cuda_runtime.h>\n" +
         header.substr(at + kRuntimeInclude.size()).str();
}

/// A top-level function of the host code that can live in a unit of its
/// own: `static void NAME(...) {...}` at the start of a line.
struct HostFunction {
  size_t begin = 0, end = 0; ///< its text in the host code, with the newline
  StringRef name;
  std::string prototype; ///< "void NAME(...);": external linkage
  bool movable = true;
};

/// The host code's top-level functions and the names its other top-level
/// statements declare (tables, the model spec, macros, main). None where a
/// construct the scan does not follow (a template, a namespace, an
/// unbalanced brace) is at the top level.
std::optional<std::vector<HostFunction>>
scanHost(StringRef host, llvm::StringSet<> &otherNames) {
  std::vector<HostFunction> functions;
  size_t pos = 0;
  while (pos < host.size()) {
    size_t eol = host.find('\n', pos);
    eol = eol == StringRef::npos ? host.size() : eol + 1;
    StringRef line = host.slice(pos, eol);
    if (line.trim().empty() || line.starts_with("//") ||
        line.starts_with(" ") || line.starts_with("}")) {
      pos = eol;
      continue;
    }
    if (line.starts_with("#")) {
      StringRef rest = line.drop_front(1).ltrim();
      if (rest.consume_front("define")) {
        rest = rest.ltrim();
        otherNames.insert(rest.take_while(isIdentChar));
      }
      pos = eol;
      continue;
    }
    if (line.starts_with("template") || line.starts_with("namespace") ||
        line.starts_with("extern \"C\" {"))
      return std::nullopt;
    StringRef rest = host.substr(pos);
    size_t brace = rest.find('{'), semi = rest.find(';');
    if (rest.starts_with("static void ") && brace != StringRef::npos &&
        brace < semi) {
      std::optional<size_t> end = definitionEnd(host, pos, /*kernel=*/true);
      if (!end)
        return std::nullopt;
      HostFunction f;
      f.begin = pos;
      f.end = host.find('\n', *end);
      f.end = f.end == StringRef::npos ? host.size() : f.end + 1;
      StringRef signature =
          rest.take_front(brace).drop_front(kStatic.size()).rtrim();
      f.name = identBefore(signature, signature.find('('));
      if (f.name.empty())
        return std::nullopt;
      f.prototype = signature.str() + ";\n";
      functions.push_back(std::move(f));
      pos = functions.back().end;
      continue;
    }
    // Another statement: the name before its first '[', '=', '(', '{' or
    // ';' is what it declares; it ends at the ';' or the brace group that
    // closes it at depth 0.
    size_t cut = rest.find_first_of("[=({;");
    if (cut == StringRef::npos)
      return std::nullopt;
    StringRef declared = identBefore(rest, cut);
    // A kernel the host unit defines itself (a multi-tensor kernel with its
    // chunk tables): `__global__ void __launch_bounds__(256) mt17(...)`
    // declares mt17, not __launch_bounds__; a function launching it stays.
    while (declared == "__launch_bounds__") {
      size_t close = rest.find(')', cut);
      if (close == StringRef::npos)
        return std::nullopt;
      cut = rest.find_first_of("[=({;", close + 1);
      if (cut == StringRef::npos)
        return std::nullopt;
      declared = identBefore(rest, cut);
    }
    otherNames.insert(declared);
    int depth = 0;
    size_t i = pos;
    for (; i < host.size(); ++i) {
      size_t skipped = skipCommentOrLiteral(host, i);
      if (skipped == StringRef::npos)
        return std::nullopt;
      if (skipped != i) {
        i = skipped;
        continue;
      }
      char c = host[i];
      if (c == '{' || c == '(' || c == '[')
        ++depth;
      else if (c == '}' || c == ')' || c == ']') {
        if (--depth < 0)
          return std::nullopt;
        // A function definition (main) ends with its body.
        if (depth == 0 && c == '}' &&
            host.substr(i + 1).ltrim(" ").starts_with("\n"))
          break;
      } else if (c == ';' && depth == 0)
        break;
    }
    if (i >= host.size())
      return std::nullopt;
    pos = host.find('\n', i);
    pos = pos == StringRef::npos ? host.size() : pos + 1;
  }
  return functions;
}

/// A step function's body line that the step can be cut after: a comment,
/// a kernel launch, a runtime call on the context or a launch check, on one
/// line. Anything else (a local, a block, a loop) keeps the function whole.
bool isStepStatement(StringRef line) {
  if (!line.consume_front("  ") || line.starts_with(" "))
    return false;
  if (line.starts_with("//"))
    return true;
  // Braces only as a braced initializer within the statement.
  if (!line.ends_with(";") || line.starts_with("{") ||
      line.count('{') != line.count('}'))
    return false;
  if (line.starts_with("ctx.") || line.starts_with("CNNRT_CHECK_KERNEL(") ||
      line.starts_with("CNNRT_CHECK_LAUNCH("))
    return true;
  // NAME[<template arguments>]<<<...>>>(...);
  size_t launch = line.find("<<<");
  return launch != StringRef::npos && launch > 0 &&
         llvm::all_of(line.take_front(launch), [](char c) {
           return isIdentChar(c) || c == '<' || c == '>' || c == ',' ||
                  c == ' ';
         });
}

/// `static void NAME(cnnrt::Context &ctx) {...}` functions of the host code
/// larger than `maxBytes` whose body is the step preamble (the arena and
/// stream locals) and then only step statements, cut into functions
/// NAMEPart0, NAMEPart1, ... of at most about `maxBytes` that each repeat
/// the preamble, and NAME calling them in order: the same launches in the
/// same order, in functions the host split can spread over units.
std::string cutStepFunctions(StringRef host, StringRef whole, size_t maxBytes) {
  constexpr StringRef kPreamble = "  char *A = ctx.arena();\n"
                                  "  cudaStream_t s = ctx.stream();\n"
                                  "  (void)A; (void)s;\n";
  std::string out;
  size_t pos = 0;
  while (true) {
    // `pos` is at the start of a line.
    size_t at = pos;
    if (!host.substr(pos).starts_with("static void ")) {
      at = host.find("\nstatic void ", pos);
      if (at == StringRef::npos)
        break;
      ++at;
    }
    size_t open = host.find(") {\n", at);
    size_t close = host.find("\n}\n", at);
    StringRef signature =
        open == StringRef::npos ? StringRef() : host.slice(at, open + 3);
    StringRef name = identBefore(signature, signature.find('('));
    bool cut = close != StringRef::npos && open != StringRef::npos &&
               open < close && !name.empty() &&
               signature ==
                   ("static void " + name + "(cnnrt::Context &ctx) {").str() &&
               close - at > maxBytes;
    StringRef body;
    if (cut) {
      body = host.slice(open + 4, close + 1);
      cut = body.consume_front(kPreamble);
    }
    SmallVector<StringRef> lines;
    if (cut) {
      body.drop_back().split(lines, '\n');
      cut = llvm::all_of(lines, isStepStatement);
      // The new names must be free.
      cut &= !StringRef(whole).contains((name + "Part").str());
    }
    if (!cut) {
      out += host.slice(pos, close == StringRef::npos ? host.size() : close + 3)
                 .str();
      pos = close == StringRef::npos ? host.size() : close + 3;
      if (close == StringRef::npos)
        break;
      continue;
    }
    out += host.slice(pos, at).str();
    std::string calls;
    unsigned part = 0;
    for (size_t l = 0; l < lines.size();) {
      std::string piece;
      // Up to the size, and a launch keeps its check.
      while (l < lines.size() &&
             (piece.size() < maxBytes || lines[l].contains("CNNRT_CHECK_")))
        piece += lines[l++].str() + "\n";
      std::string partName = (name + "Part" + Twine(part++)).str();
      out += "static void " + partName + "(cnnrt::Context &ctx) {\n" +
             kPreamble.str() + piece + "}\n\n";
      calls += "  " + partName + "(ctx);\n";
    }
    out += signature.str() + "\n" + calls + "}\n";
    pos = close + 3;
  }
  out += host.substr(pos).str();
  return out;
}

/// The prelude's kernels: name -> the size of its definition (from
/// `__global__` to the end of its body), for the names defined once (an
/// overloaded name cannot be named by `decltype`).
llvm::StringMap<size_t> preludeKernels(StringRef header) {
  llvm::StringMap<size_t> sizes;
  llvm::StringSet<> overloaded;
  constexpr StringRef kGlobal = "__global__";
  for (size_t i = 0; i < header.size(); ++i) {
    size_t skipped = skipCommentOrLiteral(header, i);
    if (skipped == StringRef::npos)
      break;
    if (skipped != i) {
      i = skipped;
      continue;
    }
    if (!header.substr(i).starts_with(kGlobal) ||
        (i > 0 && isIdentChar(header[i - 1])) ||
        (i + kGlobal.size() < header.size() &&
         isIdentChar(header[i + kGlobal.size()])))
      continue;
    // `__global__ void [__launch_bounds__(...)] NAME(`.
    StringRef rest = header.substr(i + kGlobal.size()).ltrim();
    if (!rest.consume_front("void"))
      continue;
    rest = rest.ltrim();
    if (rest.consume_front("__launch_bounds__")) {
      size_t close = rest.find(')');
      if (close == StringRef::npos)
        break;
      rest = rest.drop_front(close + 1).ltrim();
    }
    StringRef name = rest.take_while(isIdentChar);
    std::optional<size_t> end = definitionEnd(header, i, /*kernel=*/true);
    if (name.empty() || !end)
      continue;
    if (!sizes.try_emplace(name, *end - i).second)
      overloaded.insert(name);
    i = *end - 1;
  }
  for (const auto &name : overloaded)
    sizes.erase(name.getKey());
  return sizes;
}

/// The parts of `text` separated by commas outside parentheses, brackets
/// and braces.
SmallVector<StringRef> splitTopLevel(StringRef text) {
  SmallVector<StringRef> parts;
  int depth = 0;
  size_t from = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (c == ',' && depth == 0) {
      parts.push_back(text.slice(from, i).trim());
      from = i + 1;
    }
  }
  parts.push_back(text.substr(from).trim());
  return parts;
}

/// Launches of prelude kernels in host code, rewritten to go through a
/// function of a kernel unit (cnncPreludeLaunch<i>) that calls
/// cudaLaunchKernel on the kernel it instantiates. A unit of host code then
/// compiles no device code: the prelude's templates were instantiated
/// (cicc, ptxas) in every host unit that launched them, half of such a
/// unit's compile time.
///
/// `NAME<ARGS><<<grid, block, shared, stream>>>(a, b);` becomes
/// `CnncPreludeLaunch<decltype(NAME<ARGS>)>::launch(cnncPreludeLaunch<i>,
/// grid, block, shared, stream, a, b);`: the launch's arguments are
/// converted to the kernel's parameter types as a launch converts them, and
/// the stream, the configuration and the order of launches are unchanged.
/// A launch not on one line in this form stays a launch.
class PreludeLaunches {
public:
  PreludeLaunches(StringRef header) : kernels(preludeKernels(header)) {}

  /// `host` with its launches of prelude kernels rewritten, and the
  /// declarations and helper it needs at its top in `preamble` ("" where it
  /// launches none).
  std::string rewrite(StringRef host, std::string &preamble) {
    std::string out;
    std::set<unsigned> used;
    for (StringRef rest = host; !rest.empty();) {
      auto [line, tail] = rest.split('\n');
      bool newline = rest.size() > line.size();
      rest = tail;
      std::optional<std::string> call = rewriteLine(line, used);
      out += call ? *call : line.str();
      if (newline)
        out += "\n";
    }
    preamble.clear();
    if (used.empty())
      return out;
    preamble =
        "// ---- prelude kernels: launched through cnncPreludeLaunch<i> of "
        "the kernel\n// unit that instantiates them (this unit compiles no "
        "device code for them) ----\n"
        "template <class Kernel> struct CnncPreludeLaunch;\n"
        "template <class... Params> struct CnncPreludeLaunch<void(Params...)> "
        "{\n"
        "  // The launch's arguments converted to the kernel's parameters, as "
        "a launch\n  // converts them; cudaLaunchKernel reads their "
        "addresses.\n"
        "  static void launch(cudaError_t (*thunk)(dim3, dim3, size_t, "
        "cudaStream_t,\n"
        "                                          void **),\n"
        "                     dim3 grid, dim3 block, size_t shared, "
        "cudaStream_t stream,\n"
        "                     Params... params) {\n"
        "    void *args[] = {&params..., nullptr};\n"
        "    thunk(grid, block, shared, stream, args);\n"
        "  }\n};\n";
    for (unsigned i : used)
      preamble += "cudaError_t cnncPreludeLaunch" + std::to_string(i) +
                  "(dim3, dim3, size_t, cudaStream_t, void **);\n";
    return out;
  }

  /// The kernels launched so far (NAME<ARGS>), in the order of their
  /// cnncPreludeLaunch<i>, and the size of each one's definition.
  ArrayRef<std::string> instantiations() const { return launched; }
  size_t definitionSize(unsigned i) const {
    return kernels.lookup(StringRef(launched[i]).take_while(isIdentChar));
  }

  /// The definition of cnncPreludeLaunch<i> (in a kernel unit).
  std::string thunk(unsigned i) const {
    return "cudaError_t cnncPreludeLaunch" + std::to_string(i) +
           "(dim3 grid, dim3 block, size_t shared,\n    cudaStream_t stream, "
           "void **args) {\n"
           "  return cudaLaunchKernel(reinterpret_cast<const void *>(&" +
           launched[i] + "),\n      grid, block, args, shared, stream);\n}\n";
  }

private:
  std::optional<std::string> rewriteLine(StringRef line,
                                         std::set<unsigned> &used) {
    StringRef body = line.ltrim(' ');
    StringRef indent = line.take_front(line.size() - body.size());
    StringRef name = body.take_while(isIdentChar);
    size_t open = body.find("<<<");
    if (name.empty() || !kernels.count(name) || open == StringRef::npos)
      return std::nullopt;
    // NAME or NAME<template arguments>, then the configuration.
    StringRef kernel = body.take_front(open);
    StringRef targs = kernel.drop_front(name.size());
    if (!targs.empty() &&
        (!targs.starts_with("<") || !targs.ends_with(">") ||
         targs.count('<') != targs.count('>')))
      return std::nullopt;
    size_t close = body.find(">>>(", open + 3);
    if (close == StringRef::npos || !body.ends_with(");"))
      return std::nullopt;
    StringRef config = body.slice(open + 3, close);
    StringRef args = body.slice(close + 4, body.size() - 2);
    // The arguments are one parenthesized list (the line is one statement).
    int depth = 0;
    for (size_t i = 0; i < args.size() && depth >= 0; ++i) {
      size_t skipped = skipCommentOrLiteral(args, i);
      if (skipped == StringRef::npos)
        return std::nullopt;
      if (skipped != i) {
        i = skipped;
        continue;
      }
      depth += args[i] == '(' ? 1 : args[i] == ')' ? -1 : 0;
    }
    if (depth != 0)
      return std::nullopt;
    // Template arguments in the configuration would make its split by
    // commas ambiguous; the printer writes dim3(...), numbers and `s`.
    SmallVector<StringRef> parts = splitTopLevel(config);
    if (parts.size() < 2 || parts.size() > 4 || config.contains('<') ||
        config.contains('>'))
      return std::nullopt;
    while (parts.size() < 4)
      parts.push_back("0");
    auto [it, inserted] = index.try_emplace(kernel, launched.size());
    if (inserted)
      launched.push_back(kernel.str());
    used.insert(it->second);
    std::string call = indent.str() + "CnncPreludeLaunch<decltype(" +
                       kernel.str() + ")>::launch(cnncPreludeLaunch" +
                       std::to_string(it->second);
    for (StringRef p : parts)
      call += ", " + p.str();
    if (!args.trim().empty())
      call += ", " + args.str();
    return call + ");";
  }

  llvm::StringMap<size_t> kernels;
  llvm::StringMap<unsigned> index;
  std::vector<std::string> launched;
};

} // namespace

std::vector<std::string> cnnc::mutableDeviceVariables(StringRef cu) {
  std::vector<std::string> names;
  // Each open brace: whether it opened a namespace (or an extern "C"
  // block), whose contents are still at namespace scope.
  SmallVector<bool> braces;
  auto atNamespaceScope = [&] {
    return llvm::all_of(braces, [](bool b) { return b; });
  };
  size_t stmt = StringRef::npos; // the statement at namespace scope
  bool headDone = false;         // its head (up to ( [ = ; {) was judged
  auto startsLine = [&](size_t i) {
    size_t j = i;
    while (j > 0 && (cu[j - 1] == ' ' || cu[j - 1] == '\t'))
      --j;
    return j == 0 || cu[j - 1] == '\n';
  };
  for (size_t i = 0; i < cu.size(); ++i) {
    size_t skipped = skipCommentOrLiteral(cu, i);
    if (skipped == StringRef::npos)
      break;
    if (skipped != i) {
      i = skipped;
      continue;
    }
    char c = cu[i];
    if (c == '#' && startsLine(i)) {
      // A preprocessor line, with its continuations.
      while (true) {
        i = cu.find('\n', i);
        if (i == StringRef::npos || i == 0 || cu[i - 1] != '\\')
          break;
        ++i;
      }
      if (i == StringRef::npos)
        break;
      continue;
    }
    bool top = atNamespaceScope();
    if (top && stmt == StringRef::npos && !llvm::isSpace(c)) {
      stmt = i;
      headDone = false;
    }
    bool delimiter = c == '(' || c == '[' || c == '=' || c == ';' || c == '{';
    if (top && stmt != StringRef::npos && delimiter && !headDone) {
      headDone = true;
      StringRef head = cu.slice(stmt, i);
      SmallVector<StringRef> words;
      for (StringRef rest = head; !rest.empty();) {
        rest = rest.ltrim();
        StringRef w = rest.take_while(isIdentChar);
        if (w.empty()) {
          rest = rest.drop_front();
          continue;
        }
        words.push_back(w);
        rest = rest.drop_front(w.size());
      }
      auto has = [&](StringRef w) { return llvm::is_contained(words, w); };
      // A function (its parameter list) or a kernel is not a variable; a
      // const or __constant__ table is read-only, so a copy per unit is the
      // same table.
      if (c != '(' && (has("__device__") || has("__managed__")) &&
          !has("__global__") && !has("const") && !has("constexpr") &&
          !has("__constant__")) {
        StringRef name = identBefore(head, head.size());
        if (!name.empty())
          names.push_back(name.str());
      }
    }
    if (c == '{') {
      bool ns = false;
      if (top && stmt != StringRef::npos) {
        StringRef head = cu.slice(stmt, i).ltrim();
        ns = head.starts_with("namespace") || head.starts_with("extern \"C\"");
      }
      braces.push_back(ns);
      if (ns)
        stmt = StringRef::npos;
    } else if (c == '}') {
      if (braces.empty())
        break; // unbalanced: not the printer's text
      bool ns = braces.pop_back_val();
      // A namespace's or a function body's end ends the statement; an
      // initializer's brace is followed by its ';'.
      if (atNamespaceScope() &&
          (ns || !cu.slice(i + 1, cu.size()).ltrim().starts_with(";")))
        stmt = StringRef::npos;
    } else if (c == ';' && top) {
      stmt = StringRef::npos;
    }
  }
  return names;
}

std::vector<CUDATranslationUnit>
cnnc::splitCUDATranslationUnits(StringRef cu, unsigned maxKernelUnits,
                                unsigned hostUnits) {
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
  std::vector<StringRef> structs = headerStructs(header);
  for (const Item &item : *items) {
    (item.kernel ? kernels : tables).push_back(&item);
    if (!item.kernel)
      continue;
    for (StringRef s : structs)
      if (mentions(item.header, s))
        return whole;
  }
  if (kernels.empty())
    return whole;
  // A kernel's share of its unit's compile time: its text and the tables it
  // reads (a multi-tensor kernel's chunk tables are thousands of numbers),
  // a table's byte at a tenth of a kernel's (ResNet-50: ~1 ms of nvcc per KB
  // of table, ~13 per KB of kernel).
  std::vector<size_t> kernelWeight;
  size_t kernelBytes = 0;
  for (const Item *k : kernels) {
    size_t weight = k->text.size();
    for (const Item *t : tables)
      if (mentions(k->text, t->name))
        weight += t->text.size() / 10;
    kernelWeight.push_back(weight);
    kernelBytes += weight;
  }

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
  std::vector<size_t> kernelLoad; // each kernel unit's kernel weight
  for (unsigned u = 0; u < n; ++u) {
    // Kernels in order, cut where the running size passes the unit's share
    // (at least one kernel per unit).
    size_t target = kernelBytes * (u + 1) / n;
    std::string body;
    size_t first = next;
    size_t load = 0;
    while (next < kernels.size() &&
           (next == first || done + kernelWeight[next] <= target ||
            u + 1 == n) &&
           kernels.size() - next > n - u - 1) {
      body += kernels[next]->text.str() + "\n";
      done += kernelWeight[next];
      load += kernelWeight[next];
      ++next;
    }
    kernelLoad.push_back(load);
    units.push_back({"kernels" + std::to_string(u),
                     kernelUnitHeader(header, body) + kKernelsMarker.str() +
                         tablesFor(body) + body,
                     false});
  }
  // The host code's functions in `hostUnits - 1` units of their own besides
  // the host unit (the tables, the model spec, main): its host compiler and
  // the device code of the prelude's kernels it launches bound a cold build
  // once the kernels are spread over the cores.
  std::vector<std::string> hostParts;
  std::string hostMain = hostText, prototypes;
  llvm::StringSet<> otherNames;
  std::optional<std::vector<HostFunction>> functions;
  // Host units of their own only where no kernel keeps state in a
  // namespace-scope __device__ variable (one copy per unit: see the top of
  // this file); the driver reports such a variable before splitting.
  bool noDeviceVariables = mutableDeviceVariables(cu).empty();
  // The host code's launches of prelude kernels go through the kernel
  // units (PreludeLaunches), where no kernel keeps state in a
  // namespace-scope __device__ variable: each unit instantiating one would
  // have its own copy (see the top of this file). The kernels are numbered
  // in the order of the whole host code, so that the kernel units do not
  // depend on how many host units there are.
  std::optional<PreludeLaunches> preludeLaunches;
  if (noDeviceVariables && !cu.contains("cnncPreludeLaunch") &&
      !cu.contains("CnncPreludeLaunch")) {
    preludeLaunches.emplace(header);
    std::string unused;
    preludeLaunches->rewrite(hostText, unused);
  }
  if (hostUnits > 1 && noDeviceVariables) {
    hostText = cutStepFunctions(hostText, cu, hostText.size() / hostUnits);
    functions = scanHost(hostText, otherNames);
  }
  size_t movedBytes = 0;
  if (functions) {
    // A function that names a table, the spec or a macro of the host unit,
    // or a function that stays, stays too.
    for (bool changed = true; changed;) {
      changed = false;
      for (HostFunction &f : *functions) {
        if (!f.movable)
          continue;
        StringRef text = StringRef(hostText).slice(f.begin, f.end);
        bool blocked = llvm::any_of(otherNames, [&](const auto &n) {
          return mentions(text, n.getKey());
        });
        for (const HostFunction &g : *functions)
          blocked |= !g.movable && mentions(text, g.name);
        if (blocked) {
          f.movable = false;
          changed = true;
        }
      }
    }
    for (const HostFunction &f : *functions)
      if (f.movable) {
        movedBytes += f.end - f.begin;
        prototypes += f.prototype;
      }
  }
  if (movedBytes) {
    // The largest function first into the part with the least text (the
    // parts' compile times are about their sizes), each part in the text's
    // order; the host unit keeps the rest and a declaration of each.
    unsigned parts = hostUnits - 1;
    hostParts.assign(parts, "");
    std::vector<size_t> order, load(parts, 0);
    std::vector<unsigned> partOf(functions->size(), 0);
    for (size_t i = 0; i < functions->size(); ++i)
      if ((*functions)[i].movable)
        order.push_back(i);
    auto size = [&](size_t i) {
      return (*functions)[i].end - (*functions)[i].begin;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return size(a) > size(b); });
    for (size_t i : order) {
      partOf[i] = std::min_element(load.begin(), load.end()) - load.begin();
      load[partOf[i]] += size(i);
    }
    std::string rest;
    size_t prev = 0;
    for (size_t i = 0; i < functions->size(); ++i) {
      const HostFunction &f = (*functions)[i];
      rest += hostText.substr(prev, f.begin - prev);
      prev = f.end;
      StringRef text = StringRef(hostText).slice(f.begin, f.end);
      if (!f.movable) {
        rest += text.str();
        continue;
      }
      hostParts[partOf[i]] += text.drop_front(kStatic.size()).str() + "\n";
    }
    rest += hostText.substr(prev);
    hostMain = "// ---- host functions: declared here, defined in the host "
               "units ----\n" +
               prototypes + rest;
    llvm::erase_if(hostParts, [](const std::string &p) { return p.empty(); });
  }
  auto kernelDecls = [&](StringRef text, bool all) {
    std::string decls =
        "// ---- generated kernels: declared here, defined in the kernel "
        "units ----\n";
    for (const Item *k : kernels)
      if (all || mentions(text, k->name))
        decls += k->header.str() + ";\n";
    return decls;
  };
  auto hostUnit = [&](std::string name, StringRef declarations,
                      StringRef body, bool hostCode) {
    std::string preamble, text = body.str();
    if (preludeLaunches)
      text = preludeLaunches->rewrite(body, preamble);
    // decltype names the prelude kernels' instantiations, whose stubs are
    // in the kernel units: nvcc's warning 20280 ("must have a definition in
    // the current translation unit") is about a launch, which this unit no
    // longer has.
    std::string pragma =
        preamble.empty() ? "" : "#pragma nv_diag_suppress 20280\n";
    units.push_back({std::move(name),
                     pragma + header.str() + preamble + declarations.str() +
                         tablesFor(body) + "\n" + text,
                     false, hostCode});
  };
  // The host unit declares every kernel (as before the host split).
  hostUnit("host", kernelDecls(hostMain, true), hostMain,
           /*hostCode=*/!hostParts.empty());
  for (size_t p = 0; p < hostParts.size(); ++p) {
    std::string body =
        "// ---- host functions ----\n" + prototypes + hostParts[p];
    hostUnit("host" + std::to_string(p + 1), kernelDecls(body, false), body,
             /*hostCode=*/true);
  }
  // Each launched prelude kernel is instantiated in one kernel unit, the
  // largest first into the unit with the least kernel weight.
  if (preludeLaunches && !preludeLaunches->instantiations().empty()) {
    std::vector<unsigned> order(preludeLaunches->instantiations().size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
      return preludeLaunches->definitionSize(a) >
             preludeLaunches->definitionSize(b);
    });
    std::vector<std::vector<unsigned>> thunks(n);
    for (unsigned i : order) {
      unsigned u = std::min_element(kernelLoad.begin(), kernelLoad.end()) -
                   kernelLoad.begin();
      kernelLoad[u] += preludeLaunches->definitionSize(i);
      thunks[u].push_back(i);
    }
    for (unsigned u = 0; u < n; ++u) {
      if (thunks[u].empty())
        continue;
      llvm::sort(thunks[u]);
      std::string &text = units[u].text;
      text += "\n// ---- prelude kernels the host code launches ----\n";
      for (unsigned i : thunks[u])
        text += preludeLaunches->thunk(i);
    }
  }
  if (!hyper.empty())
    units.push_back({"hyper", hyper, true});
  return units;
}
