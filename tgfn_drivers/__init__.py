"""Device drivers: one module per device, each defining `DEVICE`, a `tgfn.device.Compiled`."""
