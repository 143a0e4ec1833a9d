// types.h: the small enums shared by kernel families, launchers.h and the model.
#pragma once

// What follows a matmul, per output element: + bias[col], then gelu, or + residual.
enum class Epilogue { None, Bias, BiasGelu, BiasResidual };

// Which matmul implementation the model calls (programs' --matmul own|tiled|cublas).
enum class MatmulImpl { Own, Tiled, Cublas };
