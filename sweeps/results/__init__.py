"""Where results go beyond the store: `trackers` writes to MLflow, W&B and TensorBoard, and
`export` (`depthwidth export`) sends a store's trials to them.
"""
