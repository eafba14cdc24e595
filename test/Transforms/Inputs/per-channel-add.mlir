// A model as the ONNX importer gives it, before cnn-import-cleanup: the bias
// is a broadcasting cnn.add of a 1 x C x 1 x 1 reshape (train-pipeline.mlir).
func.func @forward(%x: tensor<2x3x4x4xf32> {cnn.input},
                   %b: tensor<3xf32> {cnn.param = "bias"},
                   %wf: tensor<5x48xf32> {cnn.param = "fc.weight"}) -> tensor<2x5xf32> {
  %pb = cnn.reshape %b : (tensor<3xf32>) -> tensor<1x3x1x1xf32>
  %0 = cnn.add %x, %pb : (tensor<2x3x4x4xf32>, tensor<1x3x1x1xf32>) -> tensor<2x3x4x4xf32>
  %f = cnn.flatten %0 {axis = 1} : (tensor<2x3x4x4xf32>) -> tensor<2x48xf32>
  %y = cnn.matmul %f, %wf {transpose_rhs = true} : (tensor<2x48xf32>, tensor<5x48xf32>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}
