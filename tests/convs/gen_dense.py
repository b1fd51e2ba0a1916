# gen_dense.py OUTDIR - Gemm and MatMul models with constant weights (the packed-panel path of
# passes/ops/matmul.c, which the ONNX test data does not reach), with a numpy reference.
import sys
import onnx, numpy as np, os
from onnx import helper, TensorProto, numpy_helper
os.chdir(sys.argv[1])
rng=np.random.default_rng(1)
for tb in (0,1):
  for M,K,N,alpha,beta,cshape in ((5,64,256,0.5,2.0,(256,)),(1,100,384,1.0,1.0,(1,384)),(3,16,512,1.0,0.0,None)):
    name=f"g_tb{tb}_{M}_{K}_{N}"
    os.makedirs(name+'/test_data_set_0',exist_ok=True)
    B=rng.standard_normal((K,N)).astype(np.float32)
    inits=[numpy_helper.from_array(B.T.copy() if tb else B,'B')]
    ins=['a','B']
    C=None
    if cshape:
        C=rng.standard_normal(cshape).astype(np.float32); inits.append(numpy_helper.from_array(C,'C')); ins.append('C')
    node=helper.make_node('Gemm',ins,['y'],alpha=alpha,beta=beta,transB=tb)
    g=helper.make_graph([node],'g',[helper.make_tensor_value_info('a',TensorProto.FLOAT,[M,K])],[helper.make_tensor_value_info('y',TensorProto.FLOAT,[M,N])],inits)
    m=helper.make_model(g,opset_imports=[helper.make_opsetid('',13)]); m.ir_version=8
    onnx.save(m,name+'/model.onnx')
    A=rng.standard_normal((M,K)).astype(np.float32)
    Y=alpha*(A.astype(np.float64)@B)+(beta*C if C is not None else 0)
    open(name+'/test_data_set_0/input_0.pb','wb').write(numpy_helper.from_array(A,'a').SerializeToString())
    open(name+'/test_data_set_0/output_0.pb','wb').write(numpy_helper.from_array(Y.astype(np.float32),'y').SerializeToString())

rng=np.random.default_rng(2)
# (7,40) x 24: 7 rows by 3 vectors of 8 lanes (AVX2), which the register tile cost model
# (passes/sched_tile.c) runs as 7 rows by 1 vector
for ash,N in (((2,3,64),256),((64,),256),((5,64),384),((1,1,7,32),512),((4,64),200),((7,40),24)):
    K=ash[-1]; name="m_"+"x".join(map(str,ash))+f"_{N}"
    os.makedirs(name+'/test_data_set_0',exist_ok=True)
    B=rng.standard_normal((K,N)).astype(np.float32)
    node=helper.make_node('MatMul',['a','B'],['y'])
    A=rng.standard_normal(ash).astype(np.float32)
    Y=(A.astype(np.float64)@B).astype(np.float32)
    g=helper.make_graph([node],'g',[helper.make_tensor_value_info('a',TensorProto.FLOAT,list(ash))],[helper.make_tensor_value_info('y',TensorProto.FLOAT,list(Y.shape))],[numpy_helper.from_array(B,'B')])
    m=helper.make_model(g,opset_imports=[helper.make_opsetid('',13)]); m.ir_version=8
    onnx.save(m,name+'/model.onnx')
    open(name+'/test_data_set_0/input_0.pb','wb').write(numpy_helper.from_array(A,'a').SerializeToString())
    open(name+'/test_data_set_0/output_0.pb','wb').write(numpy_helper.from_array(Y,'y').SerializeToString())
