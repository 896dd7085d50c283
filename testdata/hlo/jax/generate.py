#!/usr/bin/env python3
"""Write the JAX programs of testdata/hlo/jax/ as HLO text, with JAX's own outputs.

For each program NAME this writes, into the folder given (default: this one):
  NAME.hlo        the module as JAX lowers it, before XLA's passes
  NAME.opt.hlo    the same module after XLA's GPU passes (fusions, library calls)
  NAME/in<i>.npy  the inputs it was run on, in parameter order
  NAME/out<i>.npy JAX's outputs for them, in result order

Every program is jitted with keep_unused=True, so its module takes every
argument in0, in1, ... names, even one the function does not read (the
embedding gradient's table): without it jit drops such parameters and the
module's parameters no longer line up with the saved inputs.

Run it where JAX sees a GPU:  python3 testdata/hlo/jax/generate.py [DIR]
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_default_matmul_precision", "highest")
rng = np.random.default_rng(2026)


def uniform(*shape, dtype=np.float32):
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


# -- a Llama-style block: RMSNorm, rotary embeddings, causal attention, SwiGLU
def llama_block(x, wq, wk, wv, wo, w_gate, w_up, w_down, g1, g2):
    seq, dim = x.shape
    heads, head_dim = 4, dim // 4

    def rms_norm(v, g):
        return v * lax.rsqrt(jnp.mean(v * v, axis=-1, keepdims=True) + 1e-6) * g

    def rope(t):  # t: [seq, heads, head_dim]
        half = head_dim // 2
        freq = 1.0 / (10000.0 ** (jnp.arange(half, dtype=jnp.float32) / half))
        angle = jnp.arange(seq, dtype=jnp.float32)[:, None] * freq[None, :]
        cos, sin = jnp.cos(angle)[:, None, :], jnp.sin(angle)[:, None, :]
        a, b = t[..., :half], t[..., half:]
        return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    h = rms_norm(x, g1)
    q = rope((h @ wq).reshape(seq, heads, head_dim))
    k = rope((h @ wk).reshape(seq, heads, head_dim))
    v = (h @ wv).reshape(seq, heads, head_dim)
    scores = jnp.einsum("qhd,khd->hqk", q, k) / jnp.sqrt(float(head_dim))
    mask = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(mask[None], scores, -jnp.inf)
    attn = jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, axis=-1), v)
    x = x + attn.reshape(seq, dim) @ wo
    h = rms_norm(x, g2)
    return x + (jax.nn.silu(h @ w_gate) * (h @ w_up)) @ w_down


def llama_args():
    dim, hidden = 32, 48
    return [uniform(9, dim)] + [uniform(dim, dim) * 0.3 for _ in range(4)] + [
        uniform(dim, hidden) * 0.3, uniform(dim, hidden) * 0.3,
        uniform(hidden, dim) * 0.3, uniform(dim), uniform(dim)]


# -- a small CNN: NHWC convolutions, relu, max pooling, a dense head, softmax
def small_cnn(images, k1, b1, k2, b2, w, b):
    dn = ("NHWC", "HWIO", "NHWC")
    y = lax.conv_general_dilated(images, k1, (1, 1), "SAME", dimension_numbers=dn)
    y = jax.nn.relu(y + b1)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = lax.conv_general_dilated(y, k2, (2, 2), "SAME", dimension_numbers=dn)
    y = jax.nn.relu(y + b2)
    y = jnp.mean(y, axis=(1, 2))
    return jax.nn.softmax(y @ w + b, axis=-1)


def cnn_args():
    return [uniform(2, 11, 10, 3), uniform(3, 3, 3, 8) * 0.5, uniform(8),
            uniform(3, 3, 8, 12) * 0.3, uniform(12), uniform(12, 5), uniform(5)]


# -- an Elman RNN over a sequence, written with lax.scan
def rnn_scan(xs, h0, w, u, b):
    def cell(h, x):
        h = jnp.tanh(x @ w + h @ u + b)
        return h, h

    last, all_h = lax.scan(cell, h0, xs)
    return last, all_h


def rnn_args():
    return [uniform(6, 3, 5), uniform(3, 7), uniform(5, 7), uniform(7, 7) * 0.5, uniform(7)]


# -- cross-entropy of logits against integer labels (take_along_axis)
def cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, labels[:, None], axis=-1)[:, 0]
    return -jnp.mean(picked)


def cross_entropy_args():
    return [uniform(13, 37) * 3.0, rng.integers(0, 37, size=13).astype(np.int32)]


# -- greedy decoding's choice: the argmax of the last logits, and its probability
def greedy_argmax(logits):
    token = jnp.argmax(logits[:, -1, :], axis=-1)
    prob = jnp.max(jax.nn.softmax(logits[:, -1, :], axis=-1), axis=-1)
    return token.astype(jnp.int32), prob


def greedy_args():
    return [uniform(3, 5, 50) * 4.0]


# -- the gradient of an embedding lookup: a scatter-add of rows into the table
def embedding_grad(table, ids, upstream):
    def loss(t):
        return jnp.sum(t[ids] * upstream)

    return jax.grad(loss)(table)


def embedding_grad_args():
    ids = rng.integers(0, 23, size=(4, 9)).astype(np.int32)
    ids[0, :3] = 5  # duplicates must add up
    return [uniform(23, 6), ids, uniform(4, 9, 6)]


# -- a KV-cache update at a run-time position, with .at[].set and dynamic_update_slice
def kv_cache_update(cache_k, cache_v, new_k, new_v, pos):
    cache_k = cache_k.at[:, pos, :].set(new_k)
    cache_v = lax.dynamic_update_slice(cache_v, new_v[:, None, :], (0, pos, 0))
    return cache_k, cache_v


def kv_cache_args():
    return [uniform(2, 16, 8), uniform(2, 16, 8), uniform(2, 8), uniform(2, 8),
            np.array(11, dtype=np.int32)]


# -- sorts: values, an argsort, a two-key lexicographic sort, descending top rows
def sorts(x, keys, vals):
    by_value = jnp.sort(x, axis=-1)
    order = jnp.argsort(x, axis=0, stable=True).astype(jnp.int32)
    k_sorted, v_sorted = lax.sort((keys, vals), num_keys=1, is_stable=True)
    descending = -jnp.sort(-x, axis=-1)[:, :3]
    return by_value, order, k_sorted, v_sorted, descending


def sorts_args():
    keys = rng.integers(0, 4, size=(17,)).astype(np.int32)  # ties: stability matters
    return [uniform(5, 17), keys, uniform(17)]


# -- cumulative sums and products along either axis
def cumulative(x):
    return jnp.cumsum(x, axis=0), jnp.cumsum(x, axis=1), lax.cummax(x, axis=1), jnp.cumprod(
        x * 0.5 + 1.0, axis=1)


def cumulative_args():
    return [uniform(6, 19)]


# -- the kernel gradients of a grouped and a depthwise convolution (JAX writes
# each as a convolution with batch_group_count)
def grouped_conv_grad(x, k_grouped, k_depthwise, upstream, upstream_depthwise):
    def conv(kernel, groups, strides):
        return lax.conv_general_dilated(x, kernel, strides, "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        feature_group_count=groups)

    grouped = jax.grad(lambda kernel: jnp.sum(conv(kernel, 2, (1, 1)) * upstream))(k_grouped)
    depthwise = jax.grad(lambda kernel: jnp.sum(conv(kernel, 4, (2, 1)) * upstream_depthwise))(k_depthwise)
    return grouped, depthwise


def grouped_conv_grad_args():
    return [uniform(3, 7, 6, 4), uniform(3, 3, 2, 6), uniform(3, 3, 1, 8), uniform(3, 5, 4, 6), uniform(3, 3, 4, 8)]


PROGRAMS = {
    "llama_block": (llama_block, llama_args),
    "small_cnn": (small_cnn, cnn_args),
    "rnn_scan": (rnn_scan, rnn_args),
    "cross_entropy": (cross_entropy, cross_entropy_args),
    "greedy_argmax": (greedy_argmax, greedy_args),
    "embedding_grad": (embedding_grad, embedding_grad_args),
    "kv_cache_update": (kv_cache_update, kv_cache_args),
    "sorts": (sorts, sorts_args),
    "cumulative": (cumulative, cumulative_args),
    "grouped_conv_grad": (grouped_conv_grad, grouped_conv_grad_args),
}


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out_dir, exist_ok=True)
    print("jax", jax.__version__, "on", jax.devices()[0].device_kind)
    for name, (fn, make_args) in PROGRAMS.items():
        args = make_args()
        jitted = jax.jit(fn, keep_unused=True)
        lowered = jitted.lower(*args)
        with open(os.path.join(out_dir, name + ".hlo"), "w") as f:
            f.write(lowered.as_text(dialect="hlo"))
        with open(os.path.join(out_dir, name + ".opt.hlo"), "w") as f:
            f.write(lowered.compile().as_text())
        results = jax.tree_util.tree_leaves(jitted(*args))
        data_dir = os.path.join(out_dir, name)
        os.makedirs(data_dir, exist_ok=True)
        for i, a in enumerate(args):
            np.save(os.path.join(data_dir, f"in{i}.npy"), np.asarray(a))
        for i, r in enumerate(results):
            np.save(os.path.join(data_dir, f"out{i}.npy"), np.asarray(r))
        print(f"{name}: {len(args)} inputs, {len(results)} outputs")


if __name__ == "__main__":
    main()
