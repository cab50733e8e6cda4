"""Optional integrations. ``iclr25.mallowspo.integrations.trl`` needs the ``[trl]`` extra (trl, datasets)."""
