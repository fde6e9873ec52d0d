"""Loaders for the training frameworks: mnistconv.tf.dataset,
mnistconv.torch.dataset, mnistconv.grain.source.
"""
