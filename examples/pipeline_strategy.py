"""The one ``strategy.pipeline`` setting the pipeline model files share
(``pipeline_of.py``, ``zoo/zoo_llama.py``): two stages, ``acc_steps``
micro-batches of ``micro_batch`` rows, the ``schedule``; under VPP
``vpp_degree`` chunks a stage, cut at each layer of class ``seg_class``."""


def configure_pipeline(strategy, schedule: str, acc_steps: int, micro_batch: int,
                       vpp_degree: int = 1, seg_class: str = "") -> None:
    strategy.pipeline.enable = True
    strategy.pipeline.pp_degree = 2
    strategy.pipeline.accumulate_steps = acc_steps
    strategy.pipeline.micro_batch_size = micro_batch
    strategy.pipeline.schedule_mode = schedule
    if vpp_degree > 1:
        strategy.pipeline.vpp_degree = vpp_degree
        strategy.pipeline.vpp_seg_method = seg_class
