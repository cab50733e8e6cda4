"""Model oracles: log-depth scale equivariance, global-local attention locality, window attention, sliding windows."""

import pytest
import torch

from iclr25.delta import DeltaConfig
from iclr25.delta.attention import AttnBlock, window_attention
from iclr25.delta.model import DeltaModel
from iclr25.delta.update_former import EfficientUpdateFormer


def micro_config(**kw):
    return DeltaConfig.micro().replace(**kw)


def random_video(t=4, h=32, w=32, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    video = (torch.rand(1, t, 3, h, w, generator=g) * 255).to(dtype)
    depth = (1.0 + 2.0 * torch.rand(1, t, h, w, generator=g)).to(dtype)
    return video, depth


torch.set_num_threads(1)


def test_depth_scale_equivariance_float64():
    torch.manual_seed(0)
    model = DeltaModel(micro_config()).double().eval()
    video, depth = random_video(t=6, dtype=torch.float64)
    with torch.no_grad():
        a = model(video, depth)
        b = model(video, 3.7 * depth)
    assert torch.allclose(a.dense["uv"], b.dense["uv"], atol=1e-8)
    assert torch.allclose(3.7 * a.dense["depth"], b.dense["depth"], rtol=1e-8)
    assert torch.allclose(a.dense["vis_logit"], b.dense["vis_logit"], atol=1e-8)
    assert torch.allclose(a.dense["conf_logit"], b.dense["conf_logit"], atol=1e-8)
    assert torch.allclose(3.7 * a.depth, b.depth, rtol=1e-8)
    # a model that fed raw depth would not be equivariant: the depth ratio tokens are what make this hold
    assert not torch.allclose(a.dense["depth"], b.dense["depth"])


def _former_and_tokens(efficient_seed=0):
    torch.manual_seed(efficient_seed)
    cfg = micro_config(num_blocks=2)
    former = EfficientUpdateFormer(cfg, input_dim=12, output_dim=5).double().eval()
    n_sparse, hw, s = 3, (7, 8), 4  # 7x8 grid -> 2x2 windows of 6x6 with padding
    tokens = torch.randn(1, n_sparse + hw[0] * hw[1], s, 12, dtype=torch.float64)
    return former, tokens, n_sparse, hw


def _window_id(n_sparse, hw, size=6):
    ids = []
    for i in range(hw[0]):
        for j in range(hw[1]):
            ids.append((i // size) * 100 + j // size)
    return torch.tensor(ids)


def test_efficient_mode_locality():
    former, tokens, n_sparse, hw = _former_and_tokens()
    perturbed = tokens.clone()
    target = n_sparse + 0  # dense token at grid (0, 0): window (0, 0)
    perturbed[0, target, 1] += 5.0
    with torch.no_grad():
        a = former(tokens, n_sparse, hw, efficient=True)
        b = former(perturbed, n_sparse, hw, efficient=True)
    win = _window_id(n_sparse, hw)
    other = n_sparse + torch.nonzero(win != win[0]).flatten()
    same = n_sparse + torch.nonzero(win == win[0]).flatten()
    assert torch.equal(a[0, other], b[0, other]), "dense tokens in other windows must be bit-identical"
    assert torch.equal(a[0, :n_sparse], b[0, :n_sparse]), "anchors must not see a perturbed dense token"
    assert not torch.allclose(a[0, same], b[0, same])
    # perturbing an anchor reaches every dense token through the virtual tokens
    pa = tokens.clone()
    pa[0, 0, 1] += 5.0
    with torch.no_grad():
        c = former(pa, n_sparse, hw, efficient=True)
    assert not torch.allclose(a[0, other], c[0, other])


def test_training_mode_is_global():
    former, tokens, n_sparse, hw = _former_and_tokens()
    perturbed = tokens.clone()
    perturbed[0, n_sparse, 1] += 5.0
    with torch.no_grad():
        a = former(tokens, n_sparse, hw, efficient=False)
        b = former(perturbed, n_sparse, hw, efficient=False)
    win = _window_id(n_sparse, hw)
    other = n_sparse + torch.nonzero(win != win[0]).flatten()
    assert not torch.allclose(a[0, other], b[0, other])
    assert not torch.allclose(a[0, :n_sparse], b[0, :n_sparse])


@pytest.mark.parametrize("hw", [(6, 6), (7, 13), (1, 1), (12, 5)])
def test_window_attention_equals_block_diagonal_full_attention(hw):
    torch.manual_seed(1)
    block = AttnBlock(16, 2, 4.0).double().eval()
    x = torch.randn(3, hw[0] * hw[1], 16, dtype=torch.float64)
    out = window_attention(block, x, hw, 6)
    win = _window_id(0, hw)
    mask = (win[:, None] == win[None, :])[None].expand(3, -1, -1)
    # full attention over all tokens with a block-diagonal (same-window) mask, written out by hand
    full = torch.empty_like(x)
    xi = block.norm1(x)
    for i in range(x.shape[1]):
        q = block.attn.to_q(xi[:, i : i + 1]).reshape(3, 1, 2, -1).transpose(1, 2)
        k, v = block.attn.to_kv(xi).reshape(3, -1, 2, 2, 8).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)) / 8**0.5
        att = att.masked_fill(~mask[:, i][:, None, None, :], float("-inf")).softmax(-1)
        y = x[:, i : i + 1] + block.attn.to_out((att @ v).transpose(1, 2).reshape(3, 1, 16))
        full[:, i : i + 1] = y + block.mlp(block.norm2(y))
    assert torch.allclose(out, full, atol=1e-10)


def test_short_video_equals_single_padded_window():
    torch.manual_seed(0)
    model = DeltaModel(micro_config()).eval()
    video, depth = random_video(t=3)
    padded_v = torch.cat([video, video[:, -1:]], 1)  # window_len 4: pad by repeating the last frame
    padded_d = torch.cat([depth, depth[:, -1:]], 1)
    with torch.no_grad():
        a = model(video, depth)
        b = model(padded_v, padded_d)
    assert a.dense["uv"].shape[1] == 3
    assert torch.allclose(a.dense["uv"], b.dense["uv"][:, :3], atol=1e-5)
    assert torch.allclose(a.dense["depth"], b.dense["depth"][:, :3], atol=1e-5)


def test_sliding_windows_first_frames_and_padding():
    torch.manual_seed(0)
    model = DeltaModel(micro_config()).eval()
    video, depth = random_video(t=7)  # window 4, step 2 -> 3 windows, padded to 8 frames
    with torch.no_grad():
        long = model(video, depth)
        short = model(video[:, :4], depth[:, :4])
    assert long.dense["uv"].shape == (1, 7, 32, 32, 2)
    for k in ("uv", "depth", "vis_logit", "conf_logit"):
        assert torch.isfinite(long.dense[k]).all()
    # frames before the first window's step are only produced by window 0, which sees only the first 4 frames
    assert torch.allclose(long.dense["uv"][:, :2], short.dense["uv"][:, :2], atol=1e-5)
    assert not torch.allclose(long.dense["uv"][:, 2:4], short.dense["uv"][:, 2:4])


def test_model_backward_and_zero_init_head_is_zero_motion():
    torch.manual_seed(0)
    model = DeltaModel(micro_config(zero_init_head=True)).train()
    video, depth = random_video(t=4)
    out = model(video, depth, keep_windows=True)
    h, w = 8, 8
    grid = torch.stack(torch.meshgrid(torch.arange(w * 1.0), torch.arange(h * 1.0), indexing="xy"), -1) * 4
    assert torch.allclose(out.coords[0, :, out.n_sparse :], grid.reshape(1, -1, 2).expand(4, -1, -1))
    loss = out.windows[0].coords[-1].sum() + out.dense["uv"].sum() + out.windows[0].vis_logit.sum()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert model.updateformer.flow_head.weight.grad.abs().sum() > 0


def _official_window_schedule(t: int, s: int, q_t: int, q_x: float, step_px: float, iters: int) -> list[float]:
    """Transcription of the official sliding-window procedure for one track under an update that adds ``step_px``
    to x at every iteration: window k starts at k*step; a track queried before the end of the previous window's
    overlap continues from the previous window's last ``overlap`` predictions (then repeats the last one); any other
    track starts at its query. The final value of a frame is the last window's prediction for it."""
    step = s // 2
    overlap = s - step
    nw = 1 if t <= s else -(-(t - s) // step) + 1
    final = [None] * (s + step * (nw - 1))
    prev = None
    for k in range(nw):
        s0 = k * step
        if k > 0 and q_t < s0 + overlap:
            init = [prev[step + min(j, overlap - 1)] for j in range(s)]
        else:
            init = [q_x] * s
        out = [x + iters * step_px for x in init]
        final[s0 : s0 + s] = out
        prev = out
    return final[:t]


def test_late_query_starts_at_its_query_not_from_drifted_windows():
    """A constant update (+1 cell in x per iteration): a track queried at frame 9 must not inherit the drift that the
    windows before its query frame accumulate (the old behaviour propagated every track from window 0)."""
    torch.manual_seed(0)
    cfg = micro_config()  # window 4, step 2
    model = DeltaModel(cfg).eval()
    c = cfg.latent_dim

    def constant_update(tokens, n_sparse, dense_hw, efficient, n_anchor=None, attn_mask=None):
        out = tokens.new_zeros(*tokens.shape[:3], 3 + c)
        out[..., 0] = 1.0  # +1 H/4 cell = +4 px per iteration
        return out

    model.updateformer.forward = constant_update
    t, iters = 12, 2
    video, depth = random_video(t=t)
    queries = torch.tensor([[[0.0, 8.0, 8.0], [9.0, 12.0, 16.0], [5.0, 20.0, 4.0]]])
    with torch.no_grad():
        out = model(video, depth, sparse_queries=queries, iters=iters, dense=False, with_anchors=False)
    for i, (qt, qx, qy) in enumerate(queries[0].tolist()):
        expected = torch.tensor(_official_window_schedule(t, cfg.window_len, int(qt), qx, 4.0, iters))
        assert torch.allclose(out.coords[0, :, i, 0], expected), (i, out.coords[0, :, i, 0], expected)
        assert torch.allclose(out.coords[0, :, i, 1], torch.full((t,), qy))
    # the late track gains two windows' worth of drift at the end, not the five windows of the whole clip
    assert out.coords[0, -1, 1, 0].item() == pytest.approx(12.0 + 2 * iters * 4.0)


def test_not_yet_queried_tracks_are_masked_from_earlier_windows():
    """Training-mode (global) attention: moving a track queried at frame 9 must not change another track's frames
    0..5 (decided by windows 0..2, where the late track is masked as the official code masks it)."""
    torch.manual_seed(0)
    model = DeltaModel(micro_config()).train()
    video, depth = random_video(t=12)
    q1 = torch.tensor([[[0.0, 8.0, 8.0], [9.0, 12.0, 16.0]]])
    q2 = q1.clone()
    q2[0, 1, 1:] = torch.tensor([24.0, 6.0])

    def run(q):
        with torch.no_grad():
            return model(video, depth, sparse_queries=q, dense=False, with_anchors=False, efficient=False).coords

    a, b = run(q1), run(q2)
    assert torch.allclose(a[0, :6, 0], b[0, :6, 0], atol=1e-6)
    # mutant: without the mask the late track is a key of the virtual tokens and leaks into the other track
    fwd = model.updateformer.forward
    model.updateformer.forward = lambda *args, attn_mask=None, **kw: fwd(*args, attn_mask=None, **kw)
    a, b = run(q1), run(q2)
    assert not torch.allclose(a[0, :6, 0], b[0, :6, 0], atol=1e-6)


def test_reusing_the_encoding_gives_identical_results():
    """``encoded=`` (used by the dense-vs-sparse benchmark to encode once for both sides) changes nothing."""
    torch.manual_seed(0)
    model = DeltaModel(micro_config()).eval()
    video, depth = random_video(t=5)
    q = torch.tensor([[[0.0, 5.0, 7.0], [3.0, 20.0, 11.0]]])
    with torch.no_grad():
        enc = model.encode(video)
        for kw in ({"dense": True}, {"sparse_queries": q, "dense": False, "with_anchors": True}):
            a, b = model(video, depth, **kw), model(video, depth, encoded=enc, **kw)
            assert torch.equal(a.coords, b.coords) and torch.equal(a.vis_logit, b.vis_logit)


def test_emb2d_official_layout_coordinates_first():
    """get_2d_embedding(xy, C, cat_coords=True) = [x, y, sin(x w0), cos(x w0), ..., sin(y w0), cos(y w0), ...] with
    the linear frequencies w_k = 2k * 1000 / C: written out by hand for C = 8 (w = 0, 250, 500, 750)."""
    import math

    from iclr25.delta.embeddings import emb2d

    x, y = 0.3, -1.2
    expected = [x, y]
    for v in (x, y):
        for wk in (0.0, 250.0, 500.0, 750.0):
            expected += [math.sin(v * wk), math.cos(v * wk)]
    got = emb2d(torch.tensor([[x, y]], dtype=torch.float64), 8)[0]
    assert torch.allclose(got, torch.tensor(expected, dtype=torch.float64), atol=1e-12)
    assert torch.equal(emb2d(torch.tensor([[x, y]], dtype=torch.float64), 8, cat_coords=False)[0], got[2:])


def test_position_embedding_is_sampled_once_per_window():
    """Official: the 2D position embedding is sampled at the window's *initial* frame-0 position and added unchanged
    in every iteration. Under a constant +1-cell update in x and y (no depth change) the d_t/d_0, track-mask and
    visibility channels of the token do not change between iterations, so they expose the added embedding: it must
    be the same in iterations 1 and 2 (a model that re-samples it at the moved position fails)."""
    torch.manual_seed(0)
    cfg = micro_config()
    model = DeltaModel(cfg).eval()
    seen = []

    def constant_update(tokens, n_sparse, dense_hw, efficient, n_anchor=None, attn_mask=None):
        seen.append(tokens.detach().clone())
        out = tokens.new_zeros(*tokens.shape[:3], 3 + cfg.latent_dim)
        out[..., :2] = 1.0
        return out

    model.updateformer.forward = constant_update
    video, depth = random_video(t=4)
    with torch.no_grad():
        out = model(video, depth, iters=2, dense=True, with_anchors=False)
    assert len(seen) == 2 and torch.allclose(out.coords[0, :, 0], torch.full((4, 2), 8.0))  # 2 iterations x 4 px
    steady = [2 + 2 * cfg.pos_emb_freqs + 2, cfg.token_dim - 2, cfg.token_dim - 1]  # d_t/d_0, track mask, vis
    assert torch.equal(seen[0][..., steady], seen[1][..., steady])
    dcorr = 2 + 2 * cfg.pos_emb_freqs + 3 + cfg.corr_dim  # depth sampled at the moved position: it does change
    assert not torch.equal(seen[0][..., dcorr], seen[1][..., dcorr])


def test_log_ratio_dense_depth_starts_at_the_input_depth_and_follows_the_upsampled_change():
    """dense_depth="log_ratio": d_t(p) = D_0(p) * exp(up(log(d_t / d_0)))(p), by hand from the absolute-mode fields."""
    torch.manual_seed(0)
    absolute = DeltaModel(micro_config()).double().eval()
    ratio = DeltaModel(micro_config(dense_depth="log_ratio")).double().eval()
    ratio.load_state_dict(absolute.state_dict())
    video, depth = random_video(t=6, dtype=torch.float64)
    with torch.no_grad():
        a, r = absolute(video, depth), ratio(video, depth)
        # the tracks themselves are the same; only the full-resolution depth differs
        assert torch.equal(a.coords, r.coords) and torch.equal(a.depth, r.depth)
        assert torch.equal(a.dense["uv"], r.dense["uv"]) and torch.equal(a.dense["vis_logit"], r.dense["vis_logit"])
        low = r.depth[:, :, r.n_sparse :]  # [B, T, hc*wc] dense track depth on the H/4 grid
        query = depth[:, 0, ::4, ::4].reshape(1, 1, -1)  # each grid track's input depth at its query pixel
        log_change = torch.log(low / query)
        up = absolute.upsample_fields(r.upsample_weights, r.coords[:, :, r.n_sparse :] / 4.0, log_change, None, None,
                                      r.dense_hw, r.dense_origin)["depth"]  # fmt: skip
        assert torch.allclose(r.dense["depth"], depth[:, :1] * torch.exp(up), rtol=1e-10)
        b = ratio(video, 3.7 * depth)  # still equivariant to the depth scale
    assert torch.allclose(3.7 * r.dense["depth"], b.dense["depth"], rtol=1e-8)


def test_log_ratio_zero_motion_model_keeps_every_pixel_at_its_input_depth():
    torch.manual_seed(0)
    model = DeltaModel(micro_config(zero_init_head=True, dense_depth="log_ratio")).eval()
    video, depth = random_video(t=6)
    with torch.no_grad():
        out = model(video, depth)
    assert torch.allclose(out.dense["depth"], depth[:, :1].expand_as(out.dense["depth"]), rtol=1e-6)
    # the official mode gives the H/4 grid depth upsampled instead, which is not the input depth
    model.cfg = model.cfg.replace(dense_depth="absolute")
    with torch.no_grad():
        assert not torch.allclose(model(video, depth).dense["depth"][:, 0], depth[:, 0], rtol=1e-2)
    with pytest.raises(ValueError, match="dense_depth"):
        micro_config(dense_depth="linear")
