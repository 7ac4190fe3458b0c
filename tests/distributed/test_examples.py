"""The examples in tgfn/examples train to the same parameters as one-device training (they return 1
when they do not)."""
from tgfn.examples import data_parallel, tensor_parallel


def test_data_parallel_on_four_devices_equals_one_device(capsys):
  assert data_parallel.main(["--steps", "2", "--batch", "32"]) == 0
  assert "with 4 device(s)" in capsys.readouterr().out


def test_tensor_parallel_on_two_devices_equals_one_device(capsys):
  assert tensor_parallel.main(["--steps", "2", "--batch", "32"]) == 0
  assert "w1 PartitionSpec(None, 'model')" in capsys.readouterr().out
