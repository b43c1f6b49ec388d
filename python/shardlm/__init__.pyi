# Type stubs of shardlm (python/shardlm_module.cpp), for editors and type checkers.
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

Ids = npt.ArrayLike

class Error(RuntimeError): ...
class JobError(Error): ...

class AutoTokenizer:
    @staticmethod
    def from_pretrained(pretrained_model_name_or_path: str, revision: str = "main") -> AutoTokenizer: ...
    def __call__(
        self,
        text: str | Sequence[str],
        add_special_tokens: bool = True,
        padding: bool | str = False,
        truncation: bool = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        padding_side: str | None = None,
    ) -> dict[str, Any]: ...
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]: ...
    def decode(self, token_ids: Ids, skip_special_tokens: bool = False) -> str: ...
    def batch_decode(self, sequences: Ids, skip_special_tokens: bool = False) -> list[str]: ...
    def apply_chat_template(
        self,
        conversation: Sequence[Mapping[str, Any]],
        tokenize: bool = True,
        add_generation_prompt: bool = False,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **template_variables: Any,
    ) -> str | list[int]: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def has_chat_template(self) -> bool: ...

class DistributedConfig:
    tp_size: int
    tp_plan: dict[str, str]
    def __init__(self, tp_size: int = 1, tp_plan: Mapping[str, str] = ...) -> None: ...

class TextIteratorStreamer(Iterator[str]):
    def __init__(self, tokenizer: AutoTokenizer, skip_prompt: bool = False, timeout: float | None = None) -> None: ...
    def __iter__(self) -> TextIteratorStreamer: ...
    def __next__(self) -> str: ...

class AutoModelForCausalLM:
    @staticmethod
    def from_pretrained(
        pretrained_model_name_or_path: str,
        *,
        dtype: str | None = None,
        device_map: str = "cpu",
        distributed_config: DistributedConfig | None = None,
        revision: str = "main",
        quantize: str | None = None,
        kv_cache_dtype: str | None = None,
        threads: int = 0,
        pjrt_plugin: str | None = None,
        compile_cache_dir: str | None = None,
        memory_map_weights: bool = False,
    ) -> AutoModelForCausalLM: ...
    def generate(
        self,
        input_ids: Ids | None = None,
        attention_mask: Ids | None = None,
        *,
        max_new_tokens: int | None = None,
        max_length: int | None = None,
        do_sample: bool | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        min_p: float | None = None,
        repetition_penalty: float | None = None,
        seed: int | None = None,
        eos_token_id: int | Sequence[int] | None = None,
        pad_token_id: int | None = None,
        bos_token_id: int | None = None,
        stop_strings: str | Sequence[str] | None = None,
        max_cache_len: int | None = None,
        cache_implementation: str | None = None,
        disable_compile: bool | None = None,
        prefill_chunk_size: int | None = None,
        streamer: TextIteratorStreamer | None = None,
        tokenizer: AutoTokenizer | None = None,
    ) -> npt.NDArray[np.int64]: ...
    def logits(self, input_ids: Ids) -> npt.NDArray[np.float32]: ...
    def compile_ahead(self, batch_sizes: Sequence[int], **generation_config: Any) -> None: ...
    @property
    def device(self) -> str: ...
    @property
    def architecture(self) -> str: ...
    @property
    def weight_bytes(self) -> int: ...
    @property
    def tp_rank(self) -> int: ...
    @property
    def tp_size(self) -> int: ...
    @property
    def last_stats(self) -> dict[str, float | int]: ...

class accelerator:
    @staticmethod
    def is_available() -> bool: ...
    @staticmethod
    def device_count() -> int: ...
