// shardlm._native: the public C++ API (include/shardlm) as Python, with transformers'
// names and calling conventions. Arrays cross as numpy int64 ids; the GIL is released
// while a model loads or runs. python/shardlm/__init__.py re-exports it.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <shardlm/shardlm.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace py = pybind11;
using namespace shardlm;

namespace {

using Rows = std::vector<std::vector<int64_t>>;

// input_ids as transformers takes them: a 2-D array (or nested lists) of ids, or one row.
Rows to_rows(const py::handle& ids, const char* name) {
  if (ids.is_none()) return {};
  py::array_t<int64_t, py::array::c_style | py::array::forcecast> array =
      py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(ids);
  if (!array) throw py::type_error(std::string(name) + ": expected an array or nested lists of integer ids");
  if (array.ndim() == 1) array = array.reshape({py::ssize_t{1}, array.shape(0)});
  if (array.ndim() != 2) throw py::value_error(std::string(name) + ": expected [batch, length], got " +
                                               std::to_string(array.ndim()) + " dimensions");
  Rows rows(array.shape(0));
  const auto view = array.unchecked<2>();
  for (py::ssize_t r = 0; r < array.shape(0); ++r)
    for (py::ssize_t c = 0; c < array.shape(1); ++c) rows[r].push_back(view(r, c));
  return rows;
}

// Rows of different lengths as one [batch, longest] array, the short ones padded at the end.
py::array_t<int64_t> to_array(const Rows& rows, int64_t pad) {
  size_t longest = 0;
  for (const auto& row : rows) longest = std::max(longest, row.size());
  py::array_t<int64_t> array({rows.size(), longest});
  auto view = array.mutable_unchecked<2>();
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t c = 0; c < longest; ++c) view(r, c) = c < rows[r].size() ? rows[r][c] : pad;
  return array;
}

std::vector<int64_t> to_ids(const py::handle& ids) {
  const Rows rows = to_rows(ids, "token_ids");
  if (rows.size() != 1) throw py::value_error("decode: expected one sequence of ids; use batch_decode for several");
  return rows[0];
}

// What calling a tokenizer returns: a dict of input_ids and attention_mask, as lists
// (one text: a flat list) or, with return_tensors="np", as [batch, length] arrays.
py::dict encoding_to_python(const BatchEncoding& encoding, bool single, const py::object& return_tensors) {
  py::dict result;
  if (!return_tensors.is_none()) {
    if (py::str(return_tensors).cast<std::string>() != "np")
      throw py::value_error("return_tensors: only \"np\" (numpy) is supported");
    for (const auto& row : encoding.input_ids)
      if (row.size() != encoding.input_ids[0].size())
        throw py::value_error("return_tensors=\"np\": the texts have different lengths; pass padding=True");
    result["input_ids"] = to_array(encoding.input_ids, 0);
    result["attention_mask"] = to_array(encoding.attention_mask, 0);
  } else if (single) {
    result["input_ids"] = py::cast(encoding.input_ids[0]);
    result["attention_mask"] = py::cast(encoding.attention_mask[0]);
  } else {
    result["input_ids"] = py::cast(encoding.input_ids);
    result["attention_mask"] = py::cast(encoding.attention_mask);
  }
  return result;
}

EncodeOptions encode_options(const py::object& padding, bool truncation, std::optional<int64_t> max_length,
                             bool add_special_tokens, std::optional<std::string> padding_side) {
  EncodeOptions options{.add_special_tokens = add_special_tokens, .truncation = truncation, .max_length = max_length,
                        .padding_side = std::move(padding_side)};
  if (py::isinstance<py::bool_>(padding)) options.padding = padding.cast<bool>() ? "longest" : "do_not_pad";
  else if (!padding.is_none()) options.padding = padding.cast<std::string>();
  return options;
}

py::dict call_tokenizer(const AutoTokenizer& tokenizer, const py::object& text, bool add_special_tokens,
                        const py::object& padding, bool truncation, std::optional<int64_t> max_length,
                        const py::object& return_tensors, std::optional<std::string> padding_side) {
  const bool single = py::isinstance<py::str>(text);
  const std::vector<std::string> texts =
      single ? std::vector<std::string>{text.cast<std::string>()} : text.cast<std::vector<std::string>>();
  const EncodeOptions options = encode_options(padding, truncation, max_length, add_special_tokens, padding_side);
  BatchEncoding encoding;
  {
    py::gil_scoped_release release;
    encoding = tokenizer(texts, options);
  }
  return encoding_to_python(encoding, single, return_tensors);
}

std::string to_json(const py::object& value) {
  return py::module_::import("json").attr("dumps")(value).cast<std::string>();
}

py::object apply_chat_template(const AutoTokenizer& tokenizer, const py::object& conversation, bool tokenize,
                               bool add_generation_prompt, const py::object& tools, const py::object& documents,
                               const py::kwargs& extra) {
  ChatTemplateOptions options{.add_generation_prompt = add_generation_prompt};
  if (!tools.is_none()) options.tools_json = to_json(tools);
  if (!documents.is_none()) options.documents_json = to_json(documents);
  if (extra.size() > 0) options.extra_variables_json = to_json(extra);
  const std::string prompt = tokenizer.apply_chat_template_json(to_json(conversation), options);
  if (!tokenize) return py::str(prompt);
  return py::cast(tokenizer.encode(prompt, /*add_special_tokens=*/false));
}

// transformers' TextIteratorStreamer: generate() (usually on another thread) puts each
// new piece of text; iterating takes them out, waiting without the GIL.
class TextIteratorStreamer {
 public:
  // A timeout that is not finite (or is over a day) waits without one.
  TextIteratorStreamer(const AutoTokenizer* tokenizer, bool skip_prompt, std::optional<double> timeout)
      : tokenizer_(tokenizer), skip_prompt_(skip_prompt),
        timeout_(timeout && std::isfinite(*timeout) && *timeout < 86400 ? timeout : std::nullopt) {}

  const AutoTokenizer* tokenizer() const { return tokenizer_; }
  // skip_prompt=False: the prompt's text comes first, as transformers streams it.
  void begin(const std::vector<int64_t>& prompt) {
    if (!skip_prompt_ && tokenizer_) put(tokenizer_->decode(prompt));
  }
  void put(std::string_view text) {
    if (!text.empty()) push(std::string(text));
  }
  // The end of one generate(): the iteration stops there, and a later generate() with the
  // same streamer is iterated afresh, as transformers' queue of pieces and stop signals.
  void end() { push(std::nullopt); }

  // The GIL is let go before the mutex is taken and taken back after it is released, so
  // a thread holding the GIL and waiting on the mutex (put, a second reader) never waits
  // on this one.
  std::string next() {
    std::optional<std::optional<std::string>> item;
    {
      py::gil_scoped_release release;
      std::unique_lock lock(mutex_);
      const auto has_work = [&] { return !pieces_.empty(); };
      if (!timeout_) ready_.wait(lock, has_work);
      else ready_.wait_for(lock, std::chrono::duration<double>(*timeout_), has_work);
      if (!pieces_.empty()) {
        item = std::move(pieces_.front());
        pieces_.pop_front();
      }
    }
    if (!item) {
      PyErr_SetString(py::module_::import("queue").attr("Empty").ptr(),
                      "TextIteratorStreamer: no text within the timeout");
      throw py::error_already_set();
    }
    if (!*item) throw py::stop_iteration();
    return std::move(**item);
  }

 private:
  void push(std::optional<std::string> item) {
    std::lock_guard lock(mutex_);
    pieces_.push_back(std::move(item));
    ready_.notify_one();
  }

  const AutoTokenizer* tokenizer_;
  bool skip_prompt_;
  std::optional<double> timeout_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::optional<std::string>> pieces_;  // text, or nullopt where a generate() ended
};

// A model as Python holds it. Python threads may share it and the GIL is released while
// it runs, so one call runs at a time (the others wait without the GIL).
struct Model {
  explicit Model(AutoModelForCausalLM loaded) : handle(std::move(loaded)) {}
  AutoModelForCausalLM handle;
  std::mutex busy;
};

struct GenerateArguments {
  GenerationConfig config;
  TextIteratorStreamer* streamer = nullptr;
  const AutoTokenizer* tokenizer = nullptr;
};

GenerateArguments generate_arguments(const py::kwargs& kwargs) {
  GenerateArguments arguments;
  GenerationConfig& c = arguments.config;
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::str(key);
    if (value.is_none()) continue;
    if (name == "max_new_tokens") c.max_new_tokens = value.cast<int64_t>();
    else if (name == "max_length") c.max_length = value.cast<int64_t>();
    else if (name == "do_sample") c.do_sample = value.cast<bool>();
    else if (name == "temperature") c.temperature = value.cast<float>();
    else if (name == "top_k") c.top_k = value.cast<int64_t>();
    else if (name == "top_p") c.top_p = value.cast<float>();
    else if (name == "min_p") c.min_p = value.cast<float>();
    else if (name == "repetition_penalty") c.repetition_penalty = value.cast<float>();
    else if (name == "seed") c.seed = value.cast<uint64_t>();
    else if (name == "eos_token_id")
      c.eos_token_id = py::isinstance<py::int_>(value) ? std::vector<int64_t>{value.cast<int64_t>()}
                                                       : value.cast<std::vector<int64_t>>();
    else if (name == "pad_token_id") c.pad_token_id = value.cast<int64_t>();
    else if (name == "bos_token_id") c.bos_token_id = value.cast<int64_t>();
    else if (name == "stop_strings")
      c.stop_strings = py::isinstance<py::str>(value) ? std::vector<std::string>{value.cast<std::string>()}
                                                      : value.cast<std::vector<std::string>>();
    else if (name == "max_cache_len") c.max_cache_len = value.cast<int64_t>();
    else if (name == "cache_implementation") c.cache_implementation = value.cast<std::string>();
    else if (name == "disable_compile") c.disable_compile = value.cast<bool>();
    else if (name == "prefill_chunk_size") c.prefill_chunk_size = value.cast<int64_t>();
    else if (name == "streamer") arguments.streamer = value.cast<TextIteratorStreamer*>();
    else if (name == "tokenizer") arguments.tokenizer = value.cast<const AutoTokenizer*>();
    else throw py::type_error("generate() got an unexpected keyword argument '" + name + "'");
  }
  return arguments;
}

py::array_t<int64_t> generate(Model& model, const py::object& input_ids,
                              const py::object& attention_mask, const py::kwargs& kwargs) {
  GenerateArguments arguments = generate_arguments(kwargs);
  BatchEncoding inputs{.input_ids = to_rows(input_ids, "input_ids"), .attention_mask = to_rows(attention_mask, "attention_mask")};
  if (inputs.input_ids.empty()) throw py::value_error("generate: input_ids is required");
  if (arguments.streamer && inputs.input_ids.size() != 1)
    throw py::value_error("generate: a streamer takes one sequence (batch size 1), as in transformers");
  TextIteratorStreamer* streamer = arguments.streamer;
  if (streamer && !arguments.tokenizer) arguments.tokenizer = streamer->tokenizer();
  if (streamer) streamer->begin(inputs.input_ids[0]);
  const TokenStreamer stream = streamer ? TokenStreamer([streamer](size_t, int64_t, std::string_view text) {
    streamer->put(text);
  })
                                        : TokenStreamer();
  Rows rows;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(model.busy);
    try {
      rows = model.handle.generate(inputs, arguments.config, stream, arguments.tokenizer);
    } catch (...) {
      if (streamer) streamer->end();
      throw;
    }
    if (streamer) streamer->end();
  }
  // transformers pads the rows that stopped early with pad_token_id (else the first eos).
  const GenerationConfig& defaults = model.handle.generation_config();
  int64_t pad = arguments.config.pad_token_id.value_or(defaults.pad_token_id.value_or(-1));
  if (pad < 0) {
    const auto& eos = arguments.config.eos_token_id ? arguments.config.eos_token_id : defaults.eos_token_id;
    pad = eos && !eos->empty() ? eos->front() : 0;
  }
  return to_array(rows, pad);
}

py::array_t<float> logits(Model& model, const py::object& input_ids) {
  const Rows rows = to_rows(input_ids, "input_ids");
  if (rows.size() != 1) throw py::value_error("logits: expected one sequence of ids");
  std::vector<std::vector<float>> values;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(model.busy);
    values = model.handle.logits(rows[0]);
  }
  const size_t vocab = values.empty() ? 0 : values[0].size();
  py::array_t<float> array({values.size(), vocab});
  auto view = array.mutable_unchecked<2>();
  for (size_t p = 0; p < values.size(); ++p)
    for (size_t v = 0; v < vocab; ++v) view(p, v) = values[p][v];
  return array;
}

std::optional<DType> dtype_option(const py::object& dtype, const char* name) {
  if (dtype.is_none()) return std::nullopt;
  std::string text = py::str(dtype);
  if (text == "auto") return std::nullopt;
  try {
    return parse_dtype(text);
  } catch (const Error& error) {
    throw py::value_error(std::string(name) + ": " + error.what());
  }
}

std::unique_ptr<Model> load_model(const std::string& path_or_id, const py::object& dtype, const std::string& device_map,
                                const py::object& distributed_config, const std::string& revision,
                                const py::object& quantize, const py::object& kv_cache_dtype, int threads,
                                const py::object& pjrt_plugin, const py::object& compile_cache_dir,
                                bool memory_map_weights) {
  PretrainedOptions options{.dtype = dtype_option(dtype, "dtype"),
                            .memory_map_weights = memory_map_weights,
                            .device_map = device_map,
                            .revision = revision,
                            .threads = threads,
                            .kv_cache_dtype = dtype_option(kv_cache_dtype, "kv_cache_dtype")};
  if (!pjrt_plugin.is_none()) options.pjrt_plugin = pjrt_plugin.cast<std::string>();
  if (!compile_cache_dir.is_none()) options.compile_cache_dir = compile_cache_dir.cast<std::string>();
  if (!quantize.is_none()) options.quantize = quantize.cast<std::string>();
  if (!distributed_config.is_none()) options.distributed_config = distributed_config.cast<DistributedConfig>();
  py::gil_scoped_release release;
  return std::make_unique<Model>(AutoModelForCausalLM::from_pretrained(path_or_id, options));
}

py::dict stats_to_python(const AutoModelForCausalLM::Stats& s) {
  py::dict d;
  d["time_to_first_token_s"] = s.time_to_first_token_s;
  d["prefill_tokens_per_s"] = s.prefill_tokens_per_s;
  d["decode_tokens_per_s"] = s.decode_tokens_per_s;
  d["decode_tokens"] = s.decode_tokens;
  d["compiles"] = s.compiles;
  d["arena_bytes"] = s.arena_bytes;
  d["kv_cache_bytes"] = s.kv_cache_bytes;
  d["programs_compiled"] = s.programs_compiled;
  d["programs_loaded"] = s.programs_loaded;
  return d;
}

void bind_tokenizer(py::module_& m) {
  py::class_<AutoTokenizer>(m, "AutoTokenizer", "tokenizer.json and tokenizer_config.json, as transformers' AutoTokenizer.")
      .def_static("from_pretrained", &AutoTokenizer::from_pretrained, py::arg("pretrained_model_name_or_path"),
                  py::arg("revision") = "main", py::call_guard<py::gil_scoped_release>(),
                  "A checkpoint directory, a model id (\"org/name\", from the Hugging Face cache or downloaded), or "
                  "\"embedded:stories260K\".")
      .def("__call__", &call_tokenizer, py::arg("text"), py::arg("add_special_tokens") = true,
           py::arg("padding") = false, py::arg("truncation") = false, py::arg("max_length") = py::none(),
           py::arg("return_tensors") = py::none(), py::arg("padding_side") = py::none(),
           "Encodes a text or a list of texts: a dict of input_ids and attention_mask (lists; numpy arrays "
           "[batch, length] with return_tensors=\"np\"). padding: False, True/\"longest\" or \"max_length\".")
      .def("encode", &AutoTokenizer::encode, py::arg("text"), py::arg("add_special_tokens") = true)
      .def("decode", [](const AutoTokenizer& t, const py::object& ids, bool skip) { return t.decode(to_ids(ids), skip); },
           py::arg("token_ids"), py::arg("skip_special_tokens") = false)
      .def("batch_decode",
           [](const AutoTokenizer& t, const py::object& sequences, bool skip) {
             std::vector<std::string> texts;
             for (const auto& row : to_rows(sequences, "sequences")) texts.push_back(t.decode(row, skip));
             return texts;
           },
           py::arg("sequences"), py::arg("skip_special_tokens") = false)
      .def("apply_chat_template", &apply_chat_template, py::arg("conversation"), py::arg("tokenize") = true,
           py::arg("add_generation_prompt") = false, py::arg("tools") = py::none(), py::arg("documents") = py::none(),
           "Renders tokenizer_config.json's chat_template for a list of {\"role\", \"content\"} dicts, byte for byte "
           "as transformers; the ids (tokenize=True) or the text. Extra keyword arguments are template variables "
           "(enable_thinking=False).")
      .def_property_readonly("vocab_size", &AutoTokenizer::vocab_size)
      .def_property_readonly("has_chat_template", &AutoTokenizer::has_chat_template);
}

void bind_model(py::module_& m) {
  py::class_<DistributedConfig>(m, "DistributedConfig", "Tensor parallelism, as transformers' DistributedConfig.")
      .def(py::init([](int tp_size, std::map<std::string, std::string> tp_plan) {
             return DistributedConfig{.tp_size = tp_size, .tp_plan = std::move(tp_plan)};
           }),
           py::arg("tp_size") = 1, py::arg("tp_plan") = std::map<std::string, std::string>{})
      .def_readwrite("tp_size", &DistributedConfig::tp_size)
      .def_readwrite("tp_plan", &DistributedConfig::tp_plan);

  py::class_<Model>(m, "AutoModelForCausalLM",
                                   "A causal language model on a device, generating with a static KV cache.")
      .def_static("from_pretrained", &load_model, py::arg("pretrained_model_name_or_path"), py::kw_only(),
                  py::arg("dtype") = py::none(), py::arg("device_map") = "cpu",
                  py::arg("distributed_config") = py::none(), py::arg("revision") = "main",
                  py::arg("quantize") = py::none(), py::arg("kv_cache_dtype") = py::none(), py::arg("threads") = 0,
                  py::arg("pjrt_plugin") = py::none(), py::arg("compile_cache_dir") = py::none(),
                  py::arg("memory_map_weights") = false,
                  "dtype: \"bfloat16\", \"float16\", \"float32\" or \"auto\" (as stored); device_map: \"cpu\", "
                  "\"cuda[:N]\", \"tpu[:N]\", \"pjrt[:N]\" or \"auto\"; quantize: \"int8\" or \"int4\" (CPU).")
      .def("generate", &generate, py::arg("input_ids") = py::none(), py::arg("attention_mask") = py::none(),
           "Generates from input_ids [batch, length] (attention_mask marks padding): a numpy array [batch, "
           "length + new], the rows that stop early padded with pad_token_id. Keyword arguments as transformers' "
           "GenerationConfig (max_new_tokens, do_sample, temperature, top_k, top_p, min_p, repetition_penalty, "
           "seed, eos_token_id, pad_token_id, stop_strings, max_cache_len, prefill_chunk_size, ...); "
           "streamer=TextIteratorStreamer, tokenizer= for stop_strings and streamed text.")
      .def("logits", &logits, py::arg("input_ids"), "Logits of every position of one sequence: [length, vocab].")
      .def("compile_ahead",
           [](Model& model, std::vector<int64_t> batch_sizes, const py::kwargs& kwargs) {
             const GenerateArguments arguments = generate_arguments(kwargs);
             py::gil_scoped_release release;
             std::lock_guard lock(model.busy);
             model.handle.compile_ahead(batch_sizes, arguments.config);
           },
           py::arg("batch_sizes"))
      .def_property_readonly("device", [](const Model& model) { return model.handle.device(); })
      .def_property_readonly("architecture", [](const Model& model) { return model.handle.architecture(); })
      .def_property_readonly("weight_bytes", [](const Model& model) { return model.handle.weight_bytes(); })
      .def_property_readonly("tp_rank", [](const Model& model) { return model.handle.tp_rank(); })
      .def_property_readonly("tp_size", [](const Model& model) { return model.handle.tp_size(); })
      .def_property_readonly("last_stats", [](Model& model) {
        AutoModelForCausalLM::Stats stats;
        {
          py::gil_scoped_release release;
          std::lock_guard lock(model.busy);
          stats = model.handle.last_stats();
        }
        return stats_to_python(stats);
      });
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "shardlm: Hugging Face causal language models from a native runtime, with transformers' names";
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<JobError>(m, "JobError", m.attr("Error").ptr());
  bind_tokenizer(m);
  bind_model(m);
  py::class_<TextIteratorStreamer>(m, "TextIteratorStreamer",
                                   "Iterates the text generate() produces, as transformers' TextIteratorStreamer.")
      .def(py::init([](const AutoTokenizer* tokenizer, bool skip_prompt, std::optional<double> timeout) {
             return new TextIteratorStreamer(tokenizer, skip_prompt, timeout);
           }),
           py::arg("tokenizer"), py::arg("skip_prompt") = false, py::arg("timeout") = py::none(),
           py::keep_alive<1, 2>())
      .def("__iter__", [](TextIteratorStreamer& s) -> TextIteratorStreamer& { return s; })
      .def("__next__", &TextIteratorStreamer::next);
  py::module_ accelerator = m.def_submodule("accelerator", "Accelerators this build can use on this machine.");
  accelerator.def("is_available", &accelerator::is_available);
  accelerator.def("device_count", &accelerator::device_count);
}
