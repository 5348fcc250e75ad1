"""The operator registry: FLOP formula, category and byte rule per ATen op family.

FLOP formulas follow :mod:`torch.utils.flop_counter`: one small, shape-only
function per op family, registered by decorator; torch's own registered formulas
(mm, addmm, bmm, baddbmm, convolution and its backward, the SDPA kernels) are
used as they are, and :mod:`roofline.tracing.formulas` fills the gaps.

A formula registered here (and a byte rule) gets the op's arguments by their
names in the op's schema (``func._schema``: ``self``, ``query``, ``is_causal``...),
with the schema's defaults filled in, never by position, so one formula serves
every overload of an op whose arguments sit in different places (torch's own
formulas take the call as it came, as torch calls them).

Complex dtypes: a formula counts real arithmetic; an op that computes in a
complex dtype costs ``complex_flops`` real FLOPs per counted FLOP, a factor
registered per op family (a complex add is 2 real FLOPs, a multiply 6, a
multiply-add 8, so a matmul counted at 2 FLOPs per multiply-add has factor 4).
Where an op's two operands may differ in dtype (``z * x``, ``z + 1.0``), the factor
is a :class:`ComplexOperands`, chosen by which operands are complex: a real factor
scales both parts of a complex one (2 real FLOPs, not 6), a real addend changes
only the real part (1, not 2). A complex call of an op registered without a
factor is recorded uncounted.

The byte model
--------------
Bytes are the compulsory traffic of one eager kernel:

* each distinct tensor input is read once and each output written once, at
  ``unique elements x itemsize`` of the view involved (a stride-0, expanded
  dimension is read once, not once per broadcast copy);
* an in-place op reads and writes the tensor it mutates; an ``out=`` argument is
  only written;
* views, reshapes, expands, ``detach`` and other metadata-only ops move 0 bytes,
  as do ``empty``-style allocations (category ``view`` / ``allocation``);
* gathers (``embedding``, ``index_select``, ``gather``, ``index``, ``take``) read
  the index and the gathered elements, not the whole table; ``embedding_bag`` (and
  its per-sample-weights gradient) reads the index, offsets and weights and the rows
  it gathers; copies of a view (``narrow_copy``, ``slice_copy``, ``select_copy``,
  ``diagonal_copy``, ``as_strided_copy``) read the view, not the tensor;
* in-place partial writes (``index_copy_``, ``index_put_``, ``scatter_``,
  ``scatter_add_``, ``scatter_reduce_``, ``index_add_``, ``index_fill_``, ``put_``)
  read the index and the source elements they use, read the destination elements
  they touch only when they accumulate into them, and write only those: a one-token
  write into a KV cache moves one token's worth, not the cache. Their out-of-place
  forms build a new tensor, so they read ``self`` and write the output whole;
* fills write without reading (``_foreach_zero_`` too); ``copy_`` and ``_foreach_copy_``
  read their sources only; fused optimizers do not write the gradients.

Caches are ignored: a tensor read by two kernels is counted twice, which is what
an eager (unfused) execution pays on a device whose cache cannot hold it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import wraps
from typing import Any

import torch
from torch.utils import flop_counter
from torch.utils._pytree import tree_flatten, tree_map

from roofline.tracing.records import Category, is_backward_kernel


class MissingOp:
    """An aten op the installed torch does not have (newer or older than it): registering
    it is skipped, so that one op missing from a supported release does not stop the
    import."""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __repr__(self) -> str:
        return f"<aten.{self.__name__}: not in torch {torch.__version__}>"


class _Aten:
    """``torch.ops.aten``, where an op this torch lacks reads as a :class:`MissingOp`."""

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(torch.ops.aten, name)
        except AttributeError:
            return MissingOp(name)


aten: Any = _Aten()

Formula = Callable[..., int]
# (arguments bound to their schema names, tensors read, tensors written) -> (read, written)
BytesRule = Callable[[dict[str, Any], list[torch.Tensor], list[torch.Tensor]], tuple[int, int]]


def _is_complex(x: Any) -> bool:
    """Whether an operand (a tensor, a Python number, None) holds complex values."""
    if isinstance(x, torch.Tensor):
        return x.dtype.is_complex
    return isinstance(x, complex)


@dataclass(frozen=True)
class ComplexOperands:
    """Real FLOPs per counted FLOP of a two-operand op, by which operands are complex.

    The formula counts the op on real numbers; the factor turns that into real arithmetic
    on the operands as they are. ``operands`` names the two operand arguments in the
    op's schema (a Python scalar operand counts by its own type: ``z * 2.0`` is complex
    times real). Both real (a real computation written to a complex ``out=``): 1.

    Attributes
    ----------
    both : both operands complex.
    first_real : the first operand real, the second complex.
    second_real : the second operand real, the first complex.
    operands : the schema names of the two operands.
    """

    both: int
    first_real: int
    second_real: int
    operands: tuple[str, str] = ("self", "other")

    def __post_init__(self) -> None:
        if min(self.both, self.first_real, self.second_real) < 1:
            raise ValueError(f"complex FLOP factors must be positive integers, got {self}")

    def factor(self, bound: dict[str, Any]) -> int:
        """The factor for one call, from its arguments bound by schema name."""
        first, second = (_is_complex(bound.get(name)) for name in self.operands)
        if first and second:
            return self.both
        if second:
            return self.first_real
        return self.second_real if first else 1


ComplexFlops = int | ComplexOperands


@dataclass(frozen=True)
class OpInfo:
    """What the registry knows about one op family.

    Attributes
    ----------
    category : the op family.
    flops : the FLOP formula; None when the op does no floating-point work by definition.
    bytes_rule : None for the default rule (read inputs, write outputs).
    kernels : device kernels one call launches.
    backward : True for gradient kernels.
    complex_flops : real FLOPs per counted FLOP when the op computes in a complex dtype
        (a :class:`ComplexOperands` when it depends on which operands are complex);
        None: no complex rule (complex calls are recorded uncounted).
    positional : the formula takes the call's own ``args``/``kwargs`` (torch's formulas),
        not the schema-named arguments.
    """

    category: Category
    flops: Formula | None
    bytes_rule: BytesRule | None = None
    kernels: int = 1
    backward: bool = False
    complex_flops: ComplexFlops | None = None
    positional: bool = False

    def count_flops(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                    bound: dict[str, Any], out: Any,
                    tensors: Sequence[torch.Tensor]) -> int | None:
        """FLOPs of one call, or None when there is no formula for it.

        ``bound`` holds the arguments by schema name; ``tensors`` are the tensors the call
        read and wrote, whose dtypes say whether it computed in a complex dtype.
        """
        if self.flops is None:
            return 0
        flops = (self.flops(*args, **kwargs, out_val=out) if self.positional
                 else self.flops(**bound, out_val=out))
        if isinstance(self.complex_flops, ComplexOperands):
            # the operands' dtypes decide, not the output's: a complex output does not
            # make a complex x real product a complex x complex one
            return int(flops * self.complex_flops.factor(bound))
        if any(t.dtype.is_complex for t in tensors):
            if self.complex_flops is None:
                return None
            flops *= self.complex_flops
        return int(flops)


_REGISTRY: dict[Any, OpInfo] = {}

# The ops whose torch.utils.flop_counter formula is used, by name, with their family. An
# op of torch's registry that is not here (a torch upgrade's new op, a custom op) is
# recorded uncounted, named in the trace's warning: a family is never guessed from a name.
# (Attention kernels and convolution_backward have formulas of their own in formulas.py.)
_TORCH_CATEGORIES = {
    "mm": Category.MATMUL, "addmm": Category.MATMUL, "bmm": Category.MATMUL,
    "baddbmm": Category.MATMUL, "_scaled_mm": Category.MATMUL,
    "convolution": Category.CONV, "_convolution": Category.CONV,
    "cudnn_convolution": Category.CONV, "convolution_overrideable": Category.CONV,
    "_slow_conv2d_forward": Category.CONV,
}
# torch's matmul, convolution and attention formulas count 2 FLOPs per multiply-add; a
# complex multiply-add is 8 real FLOPs (a complex multiply, 4 products + 2 adds, plus a
# complex add, 2).
_TORCH_COMPLEX_FLOPS = 4
# A complex x real multiply-add, z*x + acc = (a x + Re acc) + (b x + Im acc) i, is 2
# products + 2 adds = 4 real FLOPs: factor 2 (a complex (m, k) @ real (k, n) is 4mkn).
# ATen's matmul kernels refuse mixed dtypes today, so this applies if one accepts them;
# the operands are named per op (addmm's and baddbmm's first argument is the addend).
_TORCH_MATMUL_OPERANDS = {
    "mm": ("self", "mat2"), "bmm": ("self", "mat2"), "_scaled_mm": ("self", "mat2"),
    "addmm": ("mat1", "mat2"), "baddbmm": ("batch1", "batch2"),
}


def nbytes(t: torch.Tensor) -> int:
    """Unique bytes of a view: broadcast (stride-0) dimensions count once."""
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= size
    return n * t.element_size() if t.numel() else 0


def _shape_only(f: Formula) -> Formula:
    """Call ``f`` with tensors replaced by their shapes, as torch's formulas are."""

    @wraps(f)
    def wrapped(out_val: Any = None, **bound: Any) -> int:
        bound, out_shape = tree_map(
            lambda x: x.shape if isinstance(x, torch.Tensor) else x, (bound, out_val))
        return int(f(**bound, out_shape=out_shape))

    return wrapped


def _raw(f: Formula) -> Formula:
    """Call ``f`` with the tensors themselves (for formulas that need a dtype)."""

    @wraps(f)
    def wrapped(out_val: Any = None, **bound: Any) -> int:
        return int(f(**bound, out_val=out_val))

    return wrapped


def _packets(ops: Sequence[Any]) -> list[Any]:
    """Op packets to register, with the in-place twin (``relu`` -> ``relu_``) of each."""
    out = []
    for op in ops:
        if isinstance(op, MissingOp):
            continue
        packet = getattr(op, "overloadpacket", op)
        if packet in _REGISTRY:
            raise RuntimeError(f"duplicate registration for {packet}")
        out.append(packet)
        twin = (getattr(torch.ops.aten, packet.__name__ + "_", None)
                if packet.__name__[-1] != "_" else None)
        if twin is not None and twin not in _REGISTRY and twin not in ops:
            out.append(twin)
    return out


def _backward(packet: Any, backward: bool | None) -> bool:
    return is_backward_kernel(packet.__name__) if backward is None else backward


def register_formula(*ops: Any, category: Category | str, bytes_rule: BytesRule | None = None,
                     backward: bool | None = None, complex_flops: ComplexFlops | None = None,
                     get_raw: bool = False, kernels: int = 1) -> Callable[[Formula], Formula]:
    """Register a FLOP formula for one or more ops (packets or overloads).

    The formula is called with the op's arguments by schema name (tensors replaced by
    their shapes; the tensors themselves with ``get_raw=True``) and ``out_shape``, the
    output's shape (``out_val``, the output, with ``get_raw``); it ignores the arguments
    it does not need with ``**_``.

    Parameters
    ----------
    category : a :class:`Category` or its value (``"pointwise"``); anything else is refused.
    bytes_rule : how many bytes one call moves, when the default rule (every input read,
        every output written) is wrong for the op.
    backward : whether the ops are gradient kernels; default: ``_backward`` in the op's name.
    complex_flops : real FLOPs per counted FLOP for calls in a complex dtype (a complex
        add is 2, a multiply 6), or a :class:`ComplexOperands` for an op whose operands
        may mix complex and real; None: complex calls are recorded uncounted.
    get_raw : pass tensors rather than shapes.
    kernels : GPU kernels one call launches.

    Examples
    --------
    >>> @roofline.register_formula(torch.ops.aten.special_zeta.default, category="pointwise")
    ... def zeta_flops(*args, out_shape=None, **kwargs):
    ...     return 20 * math.prod(out_shape)  # say: a 20-term series per element
    >>> t = roofline.trace(lambda x: torch.special.zeta(x, x), torch.ones(100))
    >>> t.total_flops, dict(t.uncounted)
    (2000, {})
    """
    cat = Category.of(category)
    if isinstance(complex_flops, int) and complex_flops < 1:
        raise ValueError(f"complex_flops must be a positive integer, got {complex_flops!r}")

    def deco(f: Formula) -> Formula:
        wrapped = _raw(f) if get_raw else _shape_only(f)
        for packet in _packets(ops):
            _REGISTRY[packet] = OpInfo(cat, wrapped, bytes_rule, kernels,
                                       backward=_backward(packet, backward),
                                       complex_flops=complex_flops)
        return f

    return deco


def register_no_flops(category: Category | str, *ops: Any, bytes_rule: BytesRule | None = None,
                      kernels: int = 1, backward: bool | None = None) -> None:
    """Register ops that do no floating-point work (data movement, views, allocation)."""
    cat = Category.of(category)
    for packet in _packets(ops):
        _REGISTRY[packet] = OpInfo(cat, None, bytes_rule, kernels,
                                   backward=_backward(packet, backward))


#: Formulas of ops that exist only once some module defines them (op namespace ->
#: the function registering them), registered when the first of them is looked up.
LATE: dict[str, Callable[[], None]] = {}


def lookup(func: Any) -> OpInfo | None:
    """The registry entry for an op overload, ours first, then torch's formulas."""
    packet = func.overloadpacket
    info = _REGISTRY.get(packet)
    if info is not None:
        return info
    late = LATE.pop(getattr(packet, "_qualified_op_name", "").split("::")[0], None)
    if late is not None:
        before = dict(_REGISTRY)
        late()
        _REGISTRY.update(before)  # a formula registered before (the user's) wins
        return lookup(func)
    formula = flop_counter.flop_registry.get(packet)
    name = getattr(packet, "__name__", "")
    category = _TORCH_CATEGORIES.get(name)
    if formula is None or category is None or getattr(packet, "_qualified_op_name", "").split(
            "::")[0] != "aten":
        return None
    operands = _TORCH_MATMUL_OPERANDS.get(name)
    complex_flops: ComplexFlops = (
        _TORCH_COMPLEX_FLOPS if operands is None
        else ComplexOperands(_TORCH_COMPLEX_FLOPS, 2, 2, operands))
    info = OpInfo(category, formula, backward=is_backward_kernel(name),
                  complex_flops=complex_flops, positional=True)
    _REGISTRY[packet] = info
    return info


# --- byte rules -------------------------------------------------------------------

def no_bytes(bound: dict[str, Any], reads: list[torch.Tensor],
             writes: list[torch.Tensor]) -> tuple[int, int]:
    """Metadata-only ops and uninitialised allocations."""
    return 0, 0


def write_only(bound: dict[str, Any], reads: list[torch.Tensor],
               writes: list[torch.Tensor]) -> tuple[int, int]:
    """Fills and factories: the output is written, nothing is read."""
    return 0, sum(nbytes(t) for t in writes)


def _tensors_in(x: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def gather(bound: dict[str, Any], reads: list[torch.Tensor],
           writes: list[torch.Tensor]) -> tuple[int, int]:
    """Gathers read the index and the gathered elements, and write the output.

    ``out[j] = table[index[j]]``: each output element is one table element, so the table
    traffic is the output's bytes (the output has the table's dtype), not the table's;
    the index (``index``, or ``indices`` for ``embedding`` and ``index.Tensor``) is read
    once. A repeated index reads its row again (no cache).
    """
    index = bound["index"] if "index" in bound else bound.get("indices")
    written = sum(nbytes(t) for t in writes)
    return sum(nbytes(t) for t in _tensors_in(index)) + written, written


def nll_loss_gather(bound: dict[str, Any], reads: list[torch.Tensor],
                    writes: list[torch.Tensor]) -> tuple[int, int]:
    """The negative log-likelihood reads one log-probability per target, not every class.

    ``loss = -sum(w[t_i] x[i, t_i])``: the kernels (``aten/src/ATen/native/cuda/Loss.cu``,
    pytorch/pytorch@00e3254d33da) read the target, and per target one element of ``self``
    and, with class weights, one weight; they write the loss and the total weight.
    """
    target = bound["target"]
    read = nbytes(target) + target.numel() * bound["self"].element_size() + _weights(bound)
    return read, sum(nbytes(t) for t in writes)


def nll_loss_backward_bytes(bound: dict[str, Any], reads: list[torch.Tensor],
                            writes: list[torch.Tensor]) -> tuple[int, int]:
    """The gradient is zero but at each target: a fill, then one write per target.

    ``nll_loss_backward_out_cuda`` (Loss.cu, as above) zero-fills ``grad_input`` and its
    kernel writes ``-w[t_i] g`` at each target, reading the target, the output gradient,
    the total weight and the class weights it gathers; ``self`` gives only the shape.
    """
    grad_input = sum(nbytes(t) for t in writes)
    scattered = bound["target"].numel() * bound["self"].element_size()
    read = sum(nbytes(bound[k]) for k in ("target", "grad_output", "total_weight"))
    read += _weights(bound)
    return read, grad_input + scattered


def _weights(bound: dict[str, Any]) -> int:
    """Bytes of the class weights a loss gathers, one per target (0 without weights)."""
    weight = bound.get("weight")
    return bound["target"].numel() * weight.element_size() \
        if isinstance(weight, torch.Tensor) else 0


def _partial_write(bound: dict[str, Any], writes: list[torch.Tensor], touched: int,
                   index_bytes: int, source_bytes: int, accumulate: bool) -> tuple[int, int]:
    """Traffic of writing ``touched`` elements of ``self`` from an index and a source.

    In place, the kernel reads the index and the source elements it uses, reads the
    touched destination elements only when it accumulates into them (add, reduce), and
    writes those elements: the rest of ``self`` is not touched. Out of place (or into an
    ``out=`` tensor), the result is a new tensor, a copy of ``self`` with the touched
    elements replaced: ``self`` is read whole (accumulated elements included) and the
    output written whole.
    """
    dst = bound["self"]
    if any(w is dst for w in writes):
        itemsize = dst.element_size()
        read = index_bytes + source_bytes + (touched * itemsize if accumulate else 0)
        return read, touched * itemsize
    return nbytes(dst) + index_bytes + source_bytes, sum(nbytes(t) for t in writes)


def _scatter(bound: dict[str, Any], writes: list[torch.Tensor],
             accumulate: bool) -> tuple[int, int]:
    # self[index[i][j]][j] = src[i][j] (dim 0): one destination element per index element;
    # src is read at the index's positions only (it may be larger than the index), or is
    # a scalar (scatter.value)
    index, src = bound["index"], bound.get("src")
    touched = index.numel()
    source_bytes = touched * src.element_size() if isinstance(src, torch.Tensor) else 0
    return _partial_write(bound, writes, touched, nbytes(index), source_bytes, accumulate)


def scatter_bytes(bound: dict[str, Any], reads: list[torch.Tensor],
                  writes: list[torch.Tensor]) -> tuple[int, int]:
    """``scatter`` and ``scatter_reduce``: they accumulate into the destination when given
    a ``reduce``, except ``scatter_reduce(include_self=False)``, which overwrites it."""
    accumulate = bound.get("reduce") is not None and bool(bound.get("include_self", True))
    return _scatter(bound, writes, accumulate)


def scatter_add_bytes(bound: dict[str, Any], reads: list[torch.Tensor],
                      writes: list[torch.Tensor]) -> tuple[int, int]:
    """``scatter_add``: ``scatter`` that accumulates."""
    return _scatter(bound, writes, accumulate=True)


def _index_source(bound: dict[str, Any], writes: list[torch.Tensor],
                  accumulate: bool) -> tuple[int, int]:
    # self.select(dim, index[i]) (+)= source.select(dim, i): source holds len(index) slices
    # along dim, one per index entry, so the touched destination elements are source's
    # elements, all of them read
    source = bound["source"]
    return _partial_write(bound, writes, source.numel(), nbytes(bound["index"]),
                          nbytes(source), accumulate)


def index_copy_bytes(bound: dict[str, Any], reads: list[torch.Tensor],
                     writes: list[torch.Tensor]) -> tuple[int, int]:
    """``index_copy``: source slices written at the indexed positions of ``dim``."""
    return _index_source(bound, writes, accumulate=False)


def index_add_bytes(bound: dict[str, Any], reads: list[torch.Tensor],
                    writes: list[torch.Tensor]) -> tuple[int, int]:
    """``index_add``: source slices added at the indexed positions of ``dim``."""
    return _index_source(bound, writes, accumulate=True)


def indexed_numel(dst: torch.Tensor, indices: Sequence[torch.Tensor | None]) -> int:
    """Elements of ``dst`` that advanced indexing ``dst[indices]`` selects.

    The index tensors broadcast to one shape; each of its positions selects one slice of
    the dimensions no index covers (a ``None`` index is a full slice). A boolean mask over
    ``k`` dimensions stands for its ``nonzero()``: how many elements are true is data, so
    the mask's size is taken, an upper bound.
    """
    index_shapes: list[tuple[int, ...]] = []
    kept, dim = 1, 0
    for t in indices:
        if t is None:
            kept *= dst.shape[dim]
            dim += 1
        elif t.dtype in (torch.bool, torch.uint8):
            index_shapes.append((t.numel(),))
            dim += t.dim()
        else:
            index_shapes.append(tuple(t.shape))
            dim += 1
    kept *= math.prod(dst.shape[dim:])
    return math.prod(torch.broadcast_shapes(*index_shapes)) * kept if index_shapes else kept


def index_put_bytes(bound: dict[str, Any], reads: list[torch.Tensor],
                    writes: list[torch.Tensor]) -> tuple[int, int]:
    """``index_put`` / ``index_put_`` (``x[idx] = v``, ``x[idx] += v`` with accumulate).

    The values broadcast to the indexed region, so they are read once at their own
    (unique) size; the region is what is written (and read, to accumulate).
    """
    indices = bound["indices"]
    index_bytes = sum(nbytes(t) for t in indices if t is not None)
    return _partial_write(bound, writes, indexed_numel(bound["self"], indices), index_bytes,
                          nbytes(bound["values"]), accumulate=bool(bound.get("accumulate")))


def index_fill_bytes(bound: dict[str, Any], reads: list[torch.Tensor],
                     writes: list[torch.Tensor]) -> tuple[int, int]:
    """``index_fill``: ``self.select(dim, i).fill_(value)`` for each ``i`` in ``index``.

    One slice along ``dim`` per index entry (a repeated entry is written again); the
    value is a scalar or a 0-d tensor, read once.
    """
    dst, value = bound["self"], bound.get("value")
    dim = bound["dim"] % dst.dim() if dst.dim() else 0
    slice_numel = math.prod(size for i, size in enumerate(dst.shape) if i != dim)
    value_bytes = nbytes(value) if isinstance(value, torch.Tensor) else 0
    return _partial_write(bound, writes, bound["index"].numel() * slice_numel,
                          nbytes(bound["index"]), value_bytes, accumulate=False)


def put_bytes(bound: dict[str, Any], reads: list[torch.Tensor],
              writes: list[torch.Tensor]) -> tuple[int, int]:
    """``put``: ``self.flatten()[index] (+)= source``, one element per index element."""
    index = bound["index"]
    touched = index.numel()
    return _partial_write(bound, writes, touched, nbytes(index),
                          touched * bound["source"].element_size(),
                          accumulate=bool(bound.get("accumulate")))


def view_copy_bytes(view: Callable[[dict[str, Any]], torch.Tensor]) -> BytesRule:
    """Byte rule of a ``*_copy`` op that materialises a view of ``self``.

    ``view(bound)`` builds that view (``narrow_copy`` -> ``self.narrow(...)``); the copy
    reads the view's unique elements, not the whole of ``self``, and writes the output.
    """

    def rule(bound: dict[str, Any], reads: list[torch.Tensor],
             writes: list[torch.Tensor]) -> tuple[int, int]:
        return nbytes(view(bound)), sum(nbytes(t) for t in writes)

    return rule


def gathered_rows(bound: dict[str, Any], reads: list[torch.Tensor],
                  writes: list[torch.Tensor]) -> tuple[int, int]:
    """``embedding_bag`` and its per-sample-weights gradient: one ``weight`` row per index.

    Every other input (indices, offsets, per-sample weights, the bag gradient...) is read
    whole; of ``weight``, only the row of each index entry (a repeated or padding index is
    counted as read: an upper bound, no cache).
    """
    weight = bound["weight"]
    row_bytes = weight.shape[-1] * weight.element_size() if weight.dim() else 0
    others = sum(nbytes(t) for t in reads if t is not weight)
    return others + bound["indices"].numel() * row_bytes, sum(nbytes(t) for t in writes)


def copy_from_src(bound: dict[str, Any], reads: list[torch.Tensor],
                  writes: list[torch.Tensor]) -> tuple[int, int]:
    """``copy_(self, src)`` reads ``src`` and writes ``self``; ``_foreach_copy_(self, src)``
    the same, tensor by tensor."""
    return (sum(nbytes(t) for t in _tensors_in(bound.get("src"))),
            sum(nbytes(t) for t in writes))


def fused_optimizer(bound: dict[str, Any], reads: list[torch.Tensor],
                    writes: list[torch.Tensor]) -> tuple[int, int]:
    """Fused Adam/AdamW/SGD: gradients are read, not written (schema marks them mutable)."""
    grads = {id(t) for t in bound.get("grads") or ()}
    return (sum(nbytes(t) for t in reads),
            sum(nbytes(t) for t in writes if id(t) not in grads))
