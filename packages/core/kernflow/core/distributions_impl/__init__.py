"""The modules behind `kf.distributions` (TF1 `tf.distributions`), split by family.

`distribution` holds the `Distribution` base class and shared numeric helpers, `kullback_leibler` the
KL registry, `continuous` the real-valued families, `discrete` Bernoulli/Categorical/Multinomial and
`dirichlet` the Dirichlet and Dirichlet-multinomial distributions.
"""
