"""TAP-Vid-3D / TAP-Vid / CVO metrics on hand-built cases whose values are worked out by hand in the comments."""

import numpy as np
import pytest

from iclr25.delta.metrics import (
    average_over_videos,
    cvo_metrics,
    dense_3d_metrics,
    rescale_intrinsics,
    tapvid2d_metrics,
    tapvid3d_metrics,
)

K4 = (4.0, 4.0, 0.0, 0.0)  # mean focal 4: tau_delta = delta * z / 4


def _tracks(n=3, t=5, seed=0):
    rng = np.random.default_rng(seed)
    xyz = rng.uniform(-1, 1, (n, t, 3))
    xyz[..., 2] = rng.uniform(1, 3, (n, t))
    return xyz


def test_perfect_prediction_is_one():
    x = _tracks()
    occ = np.zeros(x.shape[:2], bool)
    occ[0, 2] = True
    m = tapvid3d_metrics(occ, x, occ, x, K4)
    assert m["occlusion_accuracy"] == 1.0 and m["average_pts_within_thresh"] == 1.0 and m["average_jaccard"] == 1.0
    assert set(m) >= {f"pts_within_{d}" for d in (1, 2, 4, 8, 16)} | {f"jaccard_{d}" for d in (1, 2, 4, 8, 16)}


def test_scaled_prediction_median_vs_none_and_strict_threshold():
    # one track, two frames at (0, 0, 1): predicting 2X gives error |X| = 1 m; tau = delta * 1 / 4 = 0.25, 0.5, 1 (equal
    # to the error: strict '<' puts it outside), 2, 4  ->  pts_within = [0, 0, 0, 1, 1], APD = 0.4
    x = np.array([[[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]])
    occ = np.zeros((1, 2), bool)
    m = tapvid3d_metrics(occ, x, occ, 2 * x, K4, scaling="none")
    assert [m[f"pts_within_{d}"] for d in (1, 2, 4, 8, 16)] == [0, 0, 0, 1, 1]
    assert m["average_pts_within_thresh"] == pytest.approx(0.4)
    # jaccard = TP / (visible + FP): 0/(2+2) three times, 2/(2+0) twice -> 0.4
    assert m["average_jaccard"] == pytest.approx(0.4)
    m = tapvid3d_metrics(occ, x, occ, 2 * x, K4, scaling="median")  # the global scale 1/2 is undone
    assert m["average_pts_within_thresh"] == 1.0 and m["average_jaccard"] == 1.0
    m = tapvid3d_metrics(occ, x, occ, 2 * x, K4, scaling="mean")
    assert m["average_jaccard"] == 1.0


def test_all_predicted_occluded():
    x = _tracks()
    gt_occ = np.zeros(x.shape[:2], bool)
    gt_occ[:, -1] = True  # 3 of 15 points occluded
    pred_occ = np.ones_like(gt_occ)
    m = tapvid3d_metrics(gt_occ, x, pred_occ, x, K4, scaling="none")
    assert m["average_jaccard"] == 0.0 and m["average_pts_within_thresh"] == 1.0  # APD ignores predicted visibility
    assert m["occlusion_accuracy"] == pytest.approx(3 / 15)
    m = tapvid3d_metrics(gt_occ, x, pred_occ, x, K4, scaling="median")  # no jointly visible point: NaN scale
    assert m["average_jaccard"] == 0.0 and m["average_pts_within_thresh"] == 0.0


def test_occlusion_errors_and_false_positives():
    # 1 track, 4 frames, perfect positions; gt occluded at frame 3, predicted occluded at frame 0 and visible at 3
    x = _tracks(n=1, t=4)
    gt = np.array([[False, False, False, True]])
    pr = np.array([[True, False, False, False]])
    m = tapvid3d_metrics(gt, x, pr, x, K4, scaling="none")
    assert m["occlusion_accuracy"] == pytest.approx(0.5)
    assert m["average_pts_within_thresh"] == 1.0
    # TP = 2 (frames 1, 2), visible = 3, FP = 1 (frame 3) -> 2 / 4
    assert m["average_jaccard"] == pytest.approx(0.5)


def test_intrinsics_rescale():
    k = rescale_intrinsics((500.0, 500.0, 256.0, 192.0), (384, 512))
    assert k[0] == pytest.approx(333.333333, rel=1e-6) and k[2] == pytest.approx(170.666667, rel=1e-6)
    # with image_size the threshold uses the rescaled focal: 1 m error at z=1 is inside tau_16 only if 16/f' > 1
    x = np.array([[[0.0, 0.0, 1.0]]])
    p = x + np.array([0.0, 0.0, 0.02])
    occ = np.zeros((1, 1), bool)
    m_raw = tapvid3d_metrics(occ, x, occ, p, (500.0, 500.0, 0, 0), scaling="none")
    m_scaled = tapvid3d_metrics(occ, x, occ, p, (500.0, 500.0, 0, 0), image_size=(384, 512), scaling="none")
    # tau_d = d / f: raw f=500 -> 0.002 .. 0.032 (inside at 16 only); rescaled f=333.3 -> 0.003 .. 0.048 (8 and 16)
    assert m_raw["average_pts_within_thresh"] == pytest.approx(0.2)
    assert m_scaled["average_pts_within_thresh"] == pytest.approx(0.4)


def test_other_scalings():
    x = _tracks(n=2, t=3)
    occ = np.zeros((2, 3), bool)
    q = np.array([[1, 0, 0], [2, 0, 0]], float)
    p = x.copy()
    p[0] *= 3.0  # track-specific scales are undone per trajectory (query frame depth ratio)
    p[1] *= 0.5
    assert tapvid3d_metrics(occ, x, occ, p, K4, scaling="per_trajectory", query_points=q)["average_jaccard"] == 1.0
    assert tapvid3d_metrics(occ, x, occ, p, K4, scaling="reproduce_2d")["average_jaccard"] == 1.0
    assert (
        tapvid3d_metrics(occ, x, occ, 2 * x, K4, scaling="median_on_queries", query_points=q)["average_jaccard"] == 1.0
    )
    m = tapvid3d_metrics(occ, x, occ, x, K4, scaling="local_neighborhood", query_points=q)
    assert m["average_jaccard"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="query_points"):
        tapvid3d_metrics(occ, x, occ, x, K4, scaling="per_trajectory")
    with pytest.raises(ValueError, match="Unknown scaling"):
        tapvid3d_metrics(occ, x, occ, x, K4, scaling="bogus")
    with pytest.raises(ValueError, match="expected"):
        tapvid3d_metrics(occ, x[..., :2], occ, x, K4)


def test_trackwise_and_average_over_videos():
    x = _tracks(n=2, t=2)
    occ = np.zeros((2, 2), bool)
    p = x.copy()
    p[1] += 10.0
    m = tapvid3d_metrics(occ, x, occ, p, K4, scaling="none", get_trackwise_metrics=True)
    assert np.allclose(m["average_pts_within_thresh"], [1.0, 0.0])
    avg = average_over_videos([{"a": 1.0}, {"a": 0.0}, {"a": 0.5}])
    assert avg["a"] == pytest.approx(0.5)


def test_tapvid2d_first_and_strided():
    # 1 video, 1 track, 4 frames, query at frame 1; errors per frame 0, 0, 3, 0.5 px (x only); all visible
    gt = np.zeros((1, 1, 4, 2))
    pr = gt.copy()
    pr[0, 0, :, 0] = [0.0, 0.0, 3.0, 0.5]
    occ = np.zeros((1, 1, 4), bool)
    q = np.array([[[1.0, 0.0, 0.0]]])
    first = tapvid2d_metrics(q, occ, gt, occ, pr, "first")  # frames 2, 3: errors 3, 0.5
    # pts_within: d=1 -> 1/2, d=2 -> 1/2, d=4,8,16 -> 1 : mean 0.8
    assert first["average_pts_within_thresh"][0] == pytest.approx(0.8)
    # jaccard d=1: TP 1, vis 2, FP 1 -> 1/3 ; d=2 same ; others 1 -> (2/3 + 3) / 5
    assert first["average_jaccard"][0] == pytest.approx((2 / 3 + 3) / 5)
    strided = tapvid2d_metrics(q, occ, gt, occ, pr, "strided")  # frames 0, 2, 3
    assert strided["pts_within_1"][0] == pytest.approx(2 / 3)
    assert strided["occlusion_accuracy"][0] == 1.0
    half = tapvid2d_metrics(q, occ, gt, occ, pr * 2, "first", image_size=(512, 512))  # back to 256 px
    assert half["average_pts_within_thresh"][0] == pytest.approx(0.8)
    with pytest.raises(ValueError):
        tapvid2d_metrics(q, occ, gt, occ, pr, "bogus")


def test_cvo_metrics():
    gt = np.zeros((2, 2, 2))
    pred = np.zeros((2, 2, 2))
    pred[0, 0] = [3.0, 4.0]  # EPE 5 at one occluded pixel
    occ = np.array([[True, False], [False, False]])
    prob = np.array([[0.1, 0.95], [0.95, 0.5]])  # predicted occluded: (0, 0) and (1, 1)
    m = cvo_metrics(pred, gt, occ, prob)
    assert m["epe_all"] == pytest.approx(1.25) and m["epe_occ"] == 5.0 and m["epe_vis"] == 0.0
    assert m["occ_iou"] == pytest.approx(0.5)


def test_dense_3d_metrics_perfect_and_shifted():
    rng = np.random.default_rng(0)
    xyz = rng.uniform(1, 2, (3, 4, 5, 3))
    vis = np.ones((3, 4, 5), bool)
    assert dense_3d_metrics(vis, xyz, vis, xyz, (5.0, 5.0, 2.0, 2.0), (4, 5))["average_jaccard"] == 1.0
    m = dense_3d_metrics(vis, xyz, vis, xyz + 100.0, (5.0, 5.0, 2.0, 2.0), (4, 5), scaling="none")
    assert m["average_jaccard"] == 0.0
