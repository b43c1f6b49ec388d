#!/usr/bin/env python3
"""Builds small tokenizer.json files that exercise the components the six real
tokenizers do not use (WordPiece, Metaspace, Digits, Punctuation, Whitespace, ByteLevel
with its own regex, added-token flags, ...), trained by the `tokenizers` library on the
corpus, and writes their expected outputs from that same library.

Run after make_goldens.py; see README.md.
"""
import json
import os
import random

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))


def corpus():
    with open(os.path.join(HERE, "corpus.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def wordpiece_bert(texts):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=40))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(), normalizers.StripAccents()])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=700, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return tok


def metaspace_bpe(texts):
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    return tok


def bytelevel_regex(texts):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Strip(left=False, right=True)])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=1000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       special_tokens=["<|endoftext|>"]))
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, special=True, normalized=False)])
    tok.add_tokens([AddedToken("[word]", single_word=True, normalized=False),
                    AddedToken("yo", rstrip=True, normalized=True),
                    AddedToken("é", normalized=True),
                    AddedToken("<tab>", lstrip=True, rstrip=True, normalized=False),
                    AddedToken("<spec>", special=True, normalized=False)])
    return tok


def digits_punct_suffix(texts):
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Lowercase(), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.Punctuation(behavior="contiguous")])
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=800, special_tokens=["[UNK]"], continuing_subword_prefix="##",
                                                       end_of_word_suffix="</w>"))
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    return tok


def whitespace_split_behaviors(texts):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("~"), normalizers.Replace("a", "A")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Whitespace(),
        pre_tokenizers.Split(Regex(r"[aeiouAEIOU]+"), behavior="merged_with_next"),
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"\p{N}+"), behavior="removed", invert=True),
        pre_tokenizers.Digits(individual_digits=False),
    ])
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=600, special_tokens=["[UNK]"]))
    tok.decoder = decoders.Sequence([decoders.WordPiece(prefix="##", cleanup=False), decoders.Replace("A", "a"),
                                     decoders.Strip(content="~", left=1, right=0)])
    return tok


BUILDERS = {
    "synthetic_wordpiece_bert": wordpiece_bert,
    "synthetic_metaspace_bpe": metaspace_bpe,
    "synthetic_bytelevel_regex": bytelevel_regex,
    "synthetic_digits_punct_suffix": digits_punct_suffix,
    "synthetic_whitespace_split": whitespace_split_behaviors,
}


def main():
    texts = corpus()
    # The trainers see plain sentences; every corpus string is then encoded for the goldens.
    for name, build in BUILDERS.items():
        tok = build(texts)
        directory = os.path.join(HERE, name)
        os.makedirs(directory, exist_ok=True)
        tok.save(os.path.join(directory, "tokenizer.json"))
        tok = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
        out = {"tokenizer": name, "tokenizers_version": tokenizers.__version__, "corpus_size": len(texts),
               "library": [], "random_decodes": []}
        for text in texts:
            ids = tok.encode(text, add_special_tokens=True).ids
            out["library"].append({
                "ids": ids,
                "ids_plain": tok.encode(text, add_special_tokens=False).ids,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip": tok.decode(ids, skip_special_tokens=True),
            })
        rng = random.Random(7)
        size = tok.get_vocab_size(with_added_tokens=True)
        for _ in range(60):
            seq = [rng.randrange(size) for _ in range(rng.randint(1, 16))]
            out["random_decodes"].append({"ids": seq, "library": tok.decode(seq, skip_special_tokens=False),
                                          "library_skip": tok.decode(seq, skip_special_tokens=True)})
        with open(os.path.join(directory, "goldens.json"), "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(name, "vocab", size)


if __name__ == "__main__":
    main()
