"""The kernels inductor would run on a GPU, found without one: a ``torch.compile`` backend.

The front half of inductor runs as it always does on the (fake) CPU step: dynamo,
the pre-grad passes, AOTAutograd with inductor's decompositions, the joint-graph passes
and the min-cut partitioner. Each partitioned graph (forward, backward, or an inference
graph) then goes to :func:`_schedule`, which

1. copies it onto a fake ``cuda:0`` and re-traces it with inductor's decompositions, so
   the GPU-only ones apply (autograd cannot run over fake CUDA tensors on a CPU build,
   which is why partitioning happened on the CPU);
2. runs the real ``compile_fx_inner`` for the fake GPU of :mod:`roofline.tracing.gpu_target`:
   post-grad passes, lowering, and the scheduler's fusion with triton's own ``can_fuse``
   rules;
3. reads the fused scheduler nodes in ``config._post_fusion_custom_pass`` (inductor's
   hook, called right after ``fuse_nodes``) and stops before triton codegen;
4. returns the CPU ATen graph as the "compiled" function, so the step goes on: each call
   hands the graph's kernels to the capture (:func:`kernels_sink`), once per call.

A kernel's bytes are what leaves it (inductor's per-buffer accounting, corrected as its
codegen removes buffers local to a fused kernel, see :func:`_kernel_bytes`); its FLOPs are
roofline's own formulas summed over the ATen ops fused in it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves, tree_map

from roofline.tracing.capture import Schema
from roofline.tracing.fake import unwatched
from roofline.tracing.formulas import register_inductor_prims
from roofline.tracing.gpu_target import H100_PROPERTIES, cuda_guard, fake_cuda_device
from roofline.tracing.ops import lookup
from roofline.tracing.records import Category, OpRecord

CUDA = torch.device("cuda", 0)

# Which family names a fused kernel, when its ops come from several: the most specific.
_PRIORITY = [Category.ATTENTION, Category.MATMUL, Category.CONV, Category.SOFTMAX,
             Category.NORMALIZATION, Category.LOSS, Category.OPTIMIZER, Category.EMBEDDING,
             Category.POOLING, Category.UPSAMPLE, Category.DROPOUT, Category.REDUCTION,
             Category.COPY, Category.POINTWISE]


class _Stop(Exception):
    """Raised from the post-fusion hook: the kernels are read, codegen is not needed."""


@dataclass
class Graph:
    """One partitioned graph's kernels, as op records without a phase yet."""

    kernels: list[OpRecord]
    backward: bool
    recompute_flops: int  # of which: forward ops the partitioner recomputes in backward


# --- what the capture receives ------------------------------------------------------------

_sink: list[Callable[[Graph], contextlib.AbstractContextManager[Any]]] = []


@contextlib.contextmanager
def kernels_sink(receive: Callable[[Graph], contextlib.AbstractContextManager[Any]],
                 ) -> Iterator[None]:
    """Hand every call of a compiled graph to ``receive`` while inside; the graph's ATen
    ops run inside the context ``receive`` returns."""
    _sink.append(receive)
    try:
        yield
    finally:
        _sink.remove(receive)


def backend(props: Any = H100_PROPERTIES) -> Callable[..., Any]:
    """A ``torch.compile`` backend recording the kernels inductor makes for ``props``' GPU."""
    from torch._inductor.compile_fx import compile_fx

    register_inductor_prims()

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        _sdpa_as_on_gpu(gm)
        with unwatched():
            return compile_fx(gm, example_inputs,
                              inner_compile=functools.partial(_schedule, props=props))

    return compile_graph


def _schedule(gm: torch.fx.GraphModule, example_inputs: list[Any], *, props: Any,
              **kwargs: Any) -> Any:
    from torch._functorch._aot_autograd.utils import make_boxed_func
    from torch._inductor import config
    from torch._inductor.compile_fx import compile_fx_inner

    backward = bool(kwargs.get("is_backward"))
    with _disable_current_modes(), unwatched():
        cuda_gm, cuda_inputs = _on_cuda(gm, example_inputs)
    kernels: list[OpRecord] = []
    recomputed = [0]
    kwargs = {k: v for k, v in kwargs.items() if k != "boxed_forward_device_index"}
    kwargs["cudagraphs"] = None
    # a backward graph compiles lazily, inside the step: neither the capture nor the fake
    # step's module watch must see the compiler's work
    settings = {"_post_fusion_custom_pass": functools.partial(_read, kernels, recomputed,
                                                              backward),
                "fx_graph_cache": False, "compile_threads": 1, "triton.cudagraphs": False}
    with _disable_current_modes(), unwatched(), cuda_guard(), fake_cuda_device(props), \
            config.patch(settings):
        try:
            compile_fx_inner(cuda_gm, cuda_inputs, **kwargs)
        except Exception as e:  # inductor wraps what its passes raise
            if not _stopped(e):
                raise
        else:
            raise RuntimeError("inductor finished without reaching its scheduler's hook")
    graph = Graph(kernels, backward, recomputed[0])

    def run(*args: Any) -> Any:
        with contextlib.ExitStack() as stack:
            for receive in _sink:
                stack.enter_context(receive(graph))
            return gm.forward(*args)

    return make_boxed_func(run)


def _stopped(e: BaseException | None) -> bool:
    while e is not None:
        if isinstance(e, _Stop):
            return True
        e = getattr(e, "inner_exception", None) or e.__cause__
    return False


# --- the graph on a fake GPU -------------------------------------------------------------

# node meta the re-trace must keep from the CPU graph (make_fx derives its own)
_KEPT_META = ("seq_nr", "original_aten", "nn_module_stack", "partitioner_tag",
              "autograd_backward", "fwd_nn_module_stack", "stack_trace")


def _to_cuda(x: Any) -> Any:
    if isinstance(x, torch.device) and x.type == "cpu":
        return CUDA
    if isinstance(x, (list, tuple)):
        return type(x)(_to_cuda(y) for y in x)
    if isinstance(x, dict):
        return {k: _to_cuda(v) for k, v in x.items()}
    return x


def _on_cuda(gm: torch.fx.GraphModule, example_inputs: list[Any],
             ) -> tuple[torch.fx.GraphModule, list[Any]]:
    """The partitioned graph on a fake cuda:0, re-traced with inductor's decompositions."""
    import torch.fx.traceback as fx_traceback
    from torch._guards import detect_fake_mode
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    moved = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    for node in moved.graph.nodes:
        node.args, node.kwargs = _to_cuda(node.args), _to_cuda(node.kwargs)
    moved.recompile()
    mode = detect_fake_mode(example_inputs) or FakeTensorMode(allow_non_fake_inputs=True)

    def fake_cuda(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        return mode.fake_tensor_converter.from_meta_and_device(mode, meta, CUDA)

    inputs = [fake_cuda(t) for t in example_inputs]
    with cuda_guard(), mode, fx_traceback.preserve_node_meta():
        cuda_gm = make_fx(torch.fx.Interpreter(moved).run,
                          decomposition_table=select_decomp_table())(*inputs)
    # make_fx records each node's provenance: give it back the CPU node's meta
    source = {n.name: n for n in moved.graph.nodes}
    for node in cuda_gm.graph.nodes:
        origin = node.meta.get("from_node")
        cpu = source.get(origin[0].name) if origin else None
        if cpu is not None:
            for key in _KEPT_META:
                if key in cpu.meta:
                    node.meta[key] = cpu.meta[key]
                else:
                    node.meta.pop(key, None)
    return cuda_gm, inputs


# --- reading the fused kernels -------------------------------------------------------------

def _read(sink: list[OpRecord], recomputed: list[int], backward: bool,
          nodes: list[Any]) -> None:
    for snode in nodes:
        record = _kernel(snode, backward)
        if record is not None:
            sink.append(record[0])
            recomputed[0] += record[1]
    raise _Stop


def _kernel(snode: Any, backward: bool) -> tuple[OpRecord, int] | None:
    """One scheduler node as a record (None: no kernel), and its recomputed FLOPs."""
    from torch._inductor import ir
    from torch._inductor import scheduler as s

    if isinstance(snode, s.NopKernelSchedulerNode) or isinstance(snode.node, ir.MultiOutput):
        return None  # a view, or the Python-level item of a tuple
    extern = bool(snode.is_extern())
    ops = _ops(snode, extern)
    return _record(snode, ops, extern and bool(ops), backward)


def _record(snode: Any, ops: list[torch.fx.Node], extern: bool, backward: bool,
            ) -> tuple[OpRecord, int]:
    flops = _kernel_flops(ops, extern)
    recompute = [backward and o.meta.get("partitioner_tag") == "is_forward" for o in ops]
    read, written = _kernel_bytes(snode)
    eager = [_eager_op(o) or o.target for o in ops]
    # a generated kernel is never a cuBLAS/SDPA one, even when its ops were decomposed
    # from one (the casts of an attention call's inputs under autocast)
    category = _category([ops[0].target] if extern else eager, matrix=extern)
    name = str(ops[0].target) if extern else "inductor." + (_fused_name(snode) or category)
    shapes = _extern_shapes(ops[0]) if extern else ((), ())
    record = OpRecord(
        name=name, category=category, phase="backward" if backward else "forward",
        module=_module(ops), dtype=_dtype(ops), flops=sum(f or 0 for f in flops),
        bytes_read=read, bytes_written=written, counted=None not in flops, kernels=1,
        input_shapes=shapes[0], output_shapes=shapes[1],
        backward_kernel=backward and not _all(recompute),
        recompute=_all(recompute), fused=tuple(dict.fromkeys(map(str, eager))))
    return record, sum(f for f, r in zip(flops, recompute, strict=True) if r and f)


def _kernel_flops(ops: list[torch.fx.Node], extern: bool) -> list[int | None]:
    """Each op's FLOPs in the kernel. A generated kernel may hold a piece of a GEMM or
    convolution node (the bias gradient inductor splits from convolution_backward): that
    node's FLOPs are the extern kernel's, which runs it."""
    return [_flops(o) if extern or not _is_flop_op(o) else 0 for o in ops]


def _all(flags: list[bool]) -> bool:
    """Every one, and at least one."""
    return bool(flags) and all(flags)


def _ops(snode: Any, extern: bool) -> list[torch.fx.Node]:
    """The ATen ops a kernel runs. An extern kernel's origins also hold the ops that made
    its inputs (they are in the kernels that computed them): keep the one it runs."""
    origins = _origins(snode)
    if extern:
        target = getattr(snode.node, "op_overload", None)
        origins = [o for o in origins if o.target is target or _is_flop_op(o)][:1]
    return [o for o in origins if isinstance(o.target, torch._ops.OpOverload)]


def _dtype(ops: list[torch.fx.Node]) -> str:
    """The first floating dtype a kernel's ops produce (``""``: none)."""
    first = next((v for o in ops for v in _values(o.meta.get("val")) if v.is_floating_point()),
                 None)
    return str(first.dtype).removeprefix("torch.") if first is not None else ""


def _origins(snode: Any) -> list[torch.fx.Node]:
    """The post-grad FX nodes a scheduler node was lowered from, in graph order."""
    found: dict[torch.fx.Node, None] = {}
    for sub in snode.get_nodes():
        if sub.node is not None:
            found.update(dict.fromkeys(sub.node.get_origins()))
    order = {n: i for i, n in enumerate(next(iter(found)).graph.nodes)} if found else {}
    return sorted((n for n in found if n.op == "call_function"), key=lambda n: order.get(n, 0))


def _is_flop_op(node: torch.fx.Node) -> bool:
    info = lookup(node.target) if isinstance(node.target, torch._ops.OpOverload) else None
    return info is not None and info.category.matrix


def _eager_op(node: torch.fx.Node) -> Any:
    """The eager op a post-grad node was decomposed from (None: made by a pass)."""
    return node.meta.get("original_aten")


def _category(targets: list[Any], matrix: bool = True) -> Category:
    found = set()
    for target in targets:
        info = lookup(target) if isinstance(target, torch._ops.OpOverload) else None
        if info is not None and (matrix or not info.category.matrix):
            found.add(info.category)
    return next((c for c in _PRIORITY if c in found), Category.POINTWISE)


def _values(x: Any) -> list[torch.Tensor]:
    return [v for v in tree_leaves(x) if isinstance(v, torch.Tensor)]


@functools.cache
def _schema(target: Any) -> Schema:
    return Schema(target)


def _call(node: torch.fx.Node) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
    """A post-grad node as the call the eager capture sees: its fake values as arguments."""
    def value(a: Any) -> Any:
        return a.meta.get("val") if isinstance(a, torch.fx.Node) else a

    args, kwargs = tree_map(value, (tuple(node.args), dict(node.kwargs)))
    return args, kwargs, node.meta.get("val")


def _flops(node: torch.fx.Node) -> int | None:
    """FLOPs of one post-grad node by roofline's formulas, fed as the eager capture feeds a
    call (None: no formula)."""
    info = lookup(node.target)
    if info is None:
        return None
    args, kwargs, out = _call(node)
    schema = _schema(node.target)
    reads, writes = schema.touched(args, kwargs, out)
    return info.count_flops(args, kwargs, schema.bind(args, kwargs), out, reads + writes)


def _extern_shapes(node: torch.fx.Node) -> tuple[tuple[tuple[int, ...], ...],
                                                 tuple[tuple[int, ...], ...]]:
    """Shapes of the tensors an extern kernel's op reads and writes, as the eager capture
    records them (the GEMM model reads them)."""
    reads, writes = _schema(node.target).touched(*_call(node))
    return (tuple(tuple(int(d) for d in t.shape) for t in reads),
            tuple(tuple(int(d) for d in t.shape) for t in writes))


def _module(ops: list[torch.fx.Node]) -> str:
    """The module of the kernel's first op, as ``nn_module_stack`` names it, without
    dynamo's ``L['self']`` root (the capture prefixes the model's name)."""
    for node in ops:
        stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")
        if stack:
            path = list(stack.values())[-1]
            path = path[0] if isinstance(path, tuple) else str(path)
            return _module_path(path)
    return ""


def _module_path(path: str) -> str:
    if path.startswith("L["):
        path = path[path.find("]") + 1:]
    parts = path.replace("[", ".").replace("]", "").split(".")
    return ".".join(p.strip("'\"") for p in parts if p)


def _fused_name(snode: Any) -> str:
    """The name inductor's codegen gives the kernel, without its ``triton_poi_`` prefix."""
    from torch._inductor.utils import get_fused_kernel_name

    try:
        return str(get_fused_kernel_name(snode.get_nodes(), "original_aten"))
    except Exception:  # a node kind the naming does not handle: the family names it
        return ""


def _kernel_bytes(snode: Any) -> tuple[int, int]:
    """Bytes a kernel loads and stores: inductor's accounting
    (``get_read_write_buffer_accesses``: min(elements indexed, buffer size) x dtype size),
    with two corrections from codegen's rule for the buffers a fused kernel keeps
    (``Kernel.remove_kernel_local_buffers`` -> ``can_buffer_be_removed_through_fusion``):

    * a read that is only a ``WeakDep`` (an ordering edge) loads nothing;
    * a buffer whose other users are weak or inside the kernel is never stored.
    """
    from torch._inductor.dependencies import WeakDep

    reads = snode.get_read_write_buffer_accesses(include_reads=True, include_writes=False)
    writes = snode.get_read_write_buffer_accesses(include_reads=False, include_writes=True)
    strong = {d.name for d in snode.read_writes.reads if not isinstance(d, WeakDep)}
    reads = {k: v for k, v in reads.items() if k in strong}
    if len(snode.get_nodes()) > 1:
        fused = {n.get_name() for n in snode.get_nodes()}
        writes = {k: v for k, v in writes.items()
                  if not snode.scheduler.can_buffer_be_removed_through_fusion(k, fused)}
    return int(sum(reads.values())), int(sum(writes.values()))


# --- attention as a GPU dispatches it ----------------------------------------------------

def _gpu_sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
              is_causal: bool = False, scale: float | None = None,
              enable_gqa: bool = False) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` as CUDA dispatches it: flash attention for 16-bit
    inputs without a mask and head size <= 256, else memory-efficient attention
    (``sdp_utils.cpp``'s priority order on sm80+), in autocast's dtype as CUDA autocast
    casts its inputs. Both have meta kernels and gradients,
    so AOTAutograd traces them on fake CPU tensors; the CPU's own kernel has another
    layout and backward."""
    aten = torch.ops.aten
    if torch.is_autocast_enabled("cpu"):  # CUDA autocast runs SDPA in its low precision
        low = torch.get_autocast_dtype("cpu")
        query, key, value = (t.to(low) if t.is_floating_point() else t
                             for t in (query, key, value))
    if enable_gqa and key.size(-3) != query.size(-3):
        groups = query.size(-3) // key.size(-3)
        key, value = key.repeat_interleave(groups, -3), value.repeat_interleave(groups, -3)
    if attn_mask is None and query.dtype in (torch.float16, torch.bfloat16) \
            and query.size(-1) <= 256:
        return aten._scaled_dot_product_flash_attention(
            query, key, value, dropout_p, is_causal, False, scale=scale)[0]
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(
            attn_mask.logical_not(), float("-inf"))
    grad = any(t.requires_grad for t in (query, key, value))
    return aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, grad, dropout_p, is_causal, scale=scale)[0]


def _sdpa_as_on_gpu(gm: torch.fx.GraphModule) -> None:
    import torch.nn.functional as F

    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in (
                F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention):
            node.target = _gpu_sdpa
    gm.recompile()
