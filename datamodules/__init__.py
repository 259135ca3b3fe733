"""LightningDataModules for every task of lit-attention, with offline embedded defaults."""
